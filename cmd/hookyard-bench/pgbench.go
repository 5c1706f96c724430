package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The tables every phase starts without.
const truncateReceiverSQL = `TRUNCATE webhook_inbox, webhook_inbox_body, outbox`

const truncateAllSQL = `TRUNCATE webhook_inbox, webhook_inbox_body, outbox, projection, projection_history,
	partition_fence, topic_fence, fact, action`

func (b *bench) truncate(ctx context.Context, sql string) error {
	if _, err := b.pool.Exec(ctx, sql); err != nil {
		return fmt.Errorf("truncate bench tables: %w", err)
	}
	return nil
}

// count runs a count(*) query.
func (b *bench) count(ctx context.Context, sql string, args ...any) (int64, error) {
	var n int64
	if err := b.pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count: %w", err)
	}
	return n, nil
}

// pgbenchResult is what pgbench printed.
type pgbenchResult struct {
	clients      int
	tps          float64
	latencyAvg   time.Duration
	transactions int64
	failed       int64
}

var (
	tpsRe       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
	latencyRe   = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	processedRe = regexp.MustCompile(`number of transactions actually processed: ([0-9]+)`)
	failedRe    = regexp.MustCompile(`number of failed transactions: ([0-9]+)`)
)

// pgbenchScript is the receiver's transaction for one event, as intake's
// statement (pkg/inbox) writes it: the ledger row with body_at, its body in
// webhook_inbox_body at stored_at = body_at, and its outbox row, committed
// together. The receiver coalesces concurrent events into one statement
// (group commit); pgbench commits one event per transaction, the plain
// ceiling the issue speaks of.
func pgbenchScript() string {
	payload := stripeEventBody("evt_bench", "sub_bench", time.Now().Unix())
	msg := outboxMessageJSON("evt_bench")
	var s strings.Builder
	s.WriteString("\\set r random(1, 1000000000000)\n")
	s.WriteString("BEGIN;\n")
	s.WriteString("INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, " +
		"resource_type, resource_id, body_at, status) VALUES ('stripe', 'acct_bench', 'test', 'evt_' || :client_id || '_' || :r, " +
		"'stripe-bench', 'customer.subscription.updated', 'subscription', 'sub_' || (:r::bigint % 10000), now(), 'pending') ON CONFLICT DO NOTHING;\n")
	// The body as the bytes received: a hex bytea literal (no ':' for
	// pgbench to take as a variable, no escapes).
	s.WriteString("INSERT INTO webhook_inbox_body (provider, source_account, environment, event_id, stored_at, body) " +
		"VALUES ('stripe', 'acct_bench', 'test', 'evt_' || :client_id || '_' || :r, now(), '\\x" + hex.EncodeToString(payload) + "'::bytea);\n")
	s.WriteString("INSERT INTO outbox (message_key, message) VALUES ('stripe/acct_bench/test/subscription/sub_' || (:r::bigint % 10000), '" +
		sqlQuote(string(msg)) + "'::jsonb);\n")
	s.WriteString("END;\n")
	return s.String()
}

// sqlQuote makes s a pgbench SQL literal's content. pgbench reads ":name"
// as a variable anywhere in a command, literals included, so every JSON
// key separator gets a space after it (valid JSON, a few bytes longer).
func sqlQuote(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "'", "''"), `":`, `": `)
}

// runPgbench runs the script at clients for the bench duration.
func (b *bench) runPgbench(ctx context.Context, dir string, clients int) (pgbenchResult, error) {
	res := pgbenchResult{clients: clients}
	script := filepath.Join(dir, "receiver_tx.sql")
	if err := os.WriteFile(script, []byte(pgbenchScript()), 0o600); err != nil {
		return res, fmt.Errorf("write pgbench script: %w", err)
	}
	secs := int((b.opts.duration + time.Second - 1) / time.Second)
	args := []string{"-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(2, clients)),
		"-T", strconv.Itoa(secs), "-f", script, b.opts.dbURL}
	cmd := exec.CommandContext(ctx, b.opts.pgbench, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return res, fmt.Errorf("pgbench -c %d: %w: %s", clients, err, lastLines(stderr.String(), 5))
	}
	out := stdout.String()
	m := tpsRe.FindStringSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("pgbench -c %d: no tps line in output:\n%s", clients, out)
	}
	res.tps, _ = strconv.ParseFloat(m[1], 64)
	if m := latencyRe.FindStringSubmatch(out); m != nil {
		ms, _ := strconv.ParseFloat(m[1], 64)
		res.latencyAvg = time.Duration(ms * float64(time.Millisecond))
	}
	if m := processedRe.FindStringSubmatch(out); m != nil {
		res.transactions, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := failedRe.FindStringSubmatch(out); m != nil {
		res.failed, _ = strconv.ParseInt(m[1], 10, 64)
	}
	return res, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
