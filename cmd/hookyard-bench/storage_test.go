package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/config"
)

func TestStorageFillWritesTheLedgerAndItsBodiesAsIntakeDoesAndSizesCountThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	b := &bench{opts: options{storageBodyTables: "webhook_inbox_body, missing_table"}}

	empty, err := readSizes(ctx, s.Pool)
	require.NoError(t, err)
	lsn, err := walLSN(ctx, s.Pool)
	require.NoError(t, err)
	tables, err := b.fill(ctx, s.Pool, 300, 128, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"webhook_inbox", "webhook_inbox_body"}, tables)
	wal, err := walSince(ctx, s.Pool, lsn)
	require.NoError(t, err)
	require.Positive(t, wal, "300 inserted rows write WAL")

	n, err := countInbox(ctx, s.Pool)
	require.NoError(t, err)
	require.EqualValues(t, 300, n)
	var status string
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT status FROM webhook_inbox WHERE event_id = 'fill_7'`).Scan(&status))
	require.Equal(t, "processed", status, "a retention pass takes only finished events")
	// Readers join a ledger row to its body on the identity and
	// stored_at = body_at; the legacy columns stay empty.
	var joined, legacy, minLen int
	require.NoError(t, s.Pool.QueryRow(ctx, `
SELECT count(b.body), count(i.payload) + count(i.raw_body), coalesce(min(length(b.body)), 0) FROM webhook_inbox i
LEFT JOIN webhook_inbox_body b ON (b.provider, b.source_account, b.environment, b.event_id, b.stored_at) = (i.provider, i.source_account, i.environment, i.event_id, i.body_at)`).
		Scan(&joined, &legacy, &minLen))
	require.Equal(t, 300, joined, "every ledger row finds its body")
	require.Zero(t, legacy, "bodies are stored once, in the body table")
	require.Greater(t, minLen, 200)
	var bodyLen int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT length(`+fillBodyJSON+`) FROM (SELECT 1234567::bigint AS g) x`).Scan(&bodyLen))
	require.InDelta(t, 250, bodyLen, 25, "a realistic Chargebee body")

	full, err := readSizes(ctx, s.Pool)
	require.NoError(t, err)
	grew := full.Groups["webhook_inbox"] - empty.Groups["webhook_inbox"]
	require.Positive(t, grew)
	require.Positive(t, grew/n, "bytes per event")
	require.Positive(t, full.Groups["webhook_inbox_body"]-empty.Groups["webhook_inbox_body"], "a partition counts under its table")
	for g := range full.Groups {
		require.False(t, strings.HasPrefix(g, "webhook_inbox_body_"), "partition %s counted apart from its table", g)
	}
	require.Positive(t, full.Database)
	var sum int64
	for _, v := range full.Groups {
		sum += v
	}
	require.Equal(t, full.Total, sum)
}

func TestStorageFillOfTodaysLayoutWritesTheBodyIntoTheInbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	// The baseline's schema: no body table, no body_at.
	_, err := s.Pool.Exec(ctx, `DROP TABLE webhook_inbox_body; ALTER TABLE webhook_inbox DROP COLUMN body_at`)
	require.NoError(t, err)
	b := &bench{opts: options{storageBodyTables: "webhook_inbox_body"}}
	tables, err := b.fill(ctx, s.Pool, 50, 20, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"webhook_inbox"}, tables, "no body table in today's schema: the inbox alone")
	var withPayload int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE length(payload::text) > 200`).Scan(&withPayload))
	require.Equal(t, 50, withPayload)
}

func TestStorageNewSideStartsWithIntervalPartitionsAndKeepsWhatHoldsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	b := &bench{opts: options{storageBodyTables: "webhook_inbox_body", soakInterval: time.Minute}}
	_, err := s.Pool.Exec(ctx, `CREATE TABLE body_2001 PARTITION OF webhook_inbox_body FOR VALUES FROM ('2001-01-01') TO ('2001-01-02');
INSERT INTO webhook_inbox_body VALUES ('chargebee', 'a', 'test', 'e1', '2001-01-01 10:00Z', '\x7b7d')`)
	require.NoError(t, err)
	require.NoError(t, dropEmptyPartitions(ctx, s.Pool))
	leaves := func(table string) []string {
		rows, err := s.Pool.Query(ctx, `SELECT relid::regclass::text FROM pg_partition_tree($1::regclass) WHERE isleaf AND level > 0 ORDER BY 1`, table)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	require.Equal(t, []string{"body_2001"}, leaves("webhook_inbox_body"), "the migration's empty three-day partition goes, one with a row stays")
	require.Empty(t, leaves("projection_history"), "the empty legacy partition goes")

	// The fill creates the minute partitions it writes to.
	_, err = b.fill(ctx, s.Pool, 20, 10, nil)
	require.NoError(t, err)
	var widest time.Duration
	require.NoError(t, s.Pool.QueryRow(ctx, `
SELECT coalesce(max(hi - lo), interval '0') FROM (
    SELECT (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']*)''\) TO \(''([^'']*)''\)'))[1]::timestamptz AS lo,
           (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \(''([^'']*)''\) TO \(''([^'']*)''\)'))[2]::timestamptz AS hi
    FROM pg_partition_tree('webhook_inbox_body') t JOIN pg_class c ON c.oid = t.relid
    WHERE t.level > 0 AND c.relname <> 'body_2001') x`).Scan(&widest))
	require.Equal(t, time.Minute, widest, "partitions of -soak-interval")
}

func TestStorageWALMeterCountsTheDatabasesWritesOrSaysItCannot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	b := &bench{pool: s.Pool, progress: io.Discard, opts: options{}}
	var dbName string
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT current_database()`).Scan(&dbName))
	lsn, err := walLSN(ctx, s.Pool)
	require.NoError(t, err)
	m := b.startWALMeter(ctx, dbName, lsn)
	_, err = b.fill(ctx, s.Pool, 500, 100, nil)
	require.NoError(t, err)
	got := m.end(b)
	if b.walInspect < 0 {
		require.EqualValues(t, -1, got, "no pg_walinspect on this server: the meter says it cannot tell")
		return
	}
	// At least the heap tuples of 500 rows of ~250 B bodies (the test
	// database's other schemas may add to it, never take away).
	require.Greater(t, got, int64(500*250))
	require.EqualValues(t, got, m.end(b), "ending twice reads nothing more")
}

func TestStorageFillRefusesARequiredColumnItCannotFill(t *testing.T) {
	t.Parallel()
	_, err := fillSQL("t", []column{{name: "ok", typ: "text", notNull: true}, {name: "where", typ: "point", notNull: true}})
	require.ErrorContains(t, err, "where")
	q, err := fillSQL("t", []column{{name: "event_id", typ: "text", notNull: true}, {name: "note", typ: "point"},
		{name: "id", typ: "bigint", notNull: true, identity: true}})
	require.NoError(t, err)
	require.Contains(t, q, `("event_id")`, "nullable and identity columns are left to the table")
}

func TestStorageDeadTuplesCountWhatAnUpdateLeaves(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	b := &bench{opts: options{}}
	_, err := b.fill(ctx, s.Pool, 100, 100, nil)
	require.NoError(t, err)
	_, err = s.Pool.Exec(ctx, `UPDATE webhook_inbox SET payload = NULL`)
	require.NoError(t, err)
	// The statistics reach pg_stat_user_tables within a second or so of
	// the transaction; wait for them, not for a time.
	require.Eventually(t, func() bool {
		n, err := deadTuples(ctx, s.Pool)
		return err == nil && n >= 100
	}, 20*time.Second, 100*time.Millisecond)
}

func TestStorageSoakSampleReadsSizeRowsAndTheWindowsLatency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	b := &bench{opts: options{}}
	from := time.Now().Add(-time.Second)
	_, err := b.fill(ctx, s.Pool, 40, 40, nil)
	require.NoError(t, err)
	sm, err := soakSampleOf(ctx, s.Pool, from, time.Now().Add(time.Second))
	require.NoError(t, err)
	require.EqualValues(t, 40, sm.Rows)
	require.Positive(t, sm.Database)
	require.Positive(t, sm.Total)
	require.GreaterOrEqual(t, sm.InboxP99, 0.0, "today's inbox has received_at and processed_at")
}

func TestStorageSoakTableMarksHorizonBoundariesAndChecksGrowth(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	b := &bench{out: &out, opts: options{soakRate: 1000, soakDuration: 3 * time.Minute, soakHorizon: time.Minute, soakInterval: 30 * time.Second}}
	sides := []*storageSide{{key: "today", label: "today"}, {key: "new", label: "new"}}
	grow := &soakResult{Side: "today", First: 100 << 20, Last: 150 << 20, Ratio: 1.5}
	flat := &soakResult{Side: "new", First: 100 << 20, Last: 105 << 20, Ratio: 1.05, Held: true}
	for i := range 6 {
		grow.Samples = append(grow.Samples, soakSample{Elapsed: float64(30 * (i + 1)), Database: int64(100+10*i) << 20, Boundary: i%2 == 1, InboxP99: 0.02})
		flat.Samples = append(flat.Samples, soakSample{Elapsed: float64(30 * (i + 1)), Database: 100 << 20, Boundary: i%2 == 1, InboxP99: -1})
	}
	b.printSoak(sides, []*soakResult{grow, flat})
	require.Len(t, b.tables, 1)
	tb := b.tables[0]
	require.Len(t, tb.rows, 7, "one row per sample and the check")
	require.Equal(t, "1.0 (horizon)", tb.rows[1][0])
	require.Equal(t, "0.5", tb.rows[0][0])
	for _, r := range tb.rows {
		require.Len(t, r, len(tb.header))
	}
	require.Contains(t, tb.rows[6][1], "false")
	require.Contains(t, tb.rows[6][5], "true")
	require.Contains(t, tb.rows[0][8], "n/a", "no inbox latency in a layout that cannot say")
	require.Contains(t, out.String(), "S4. Soak")
}

func TestStorageCommandFoundOnlyAsACommandOfTheUsage(t *testing.T) {
	t.Parallel()
	usage := "hookyard\n\nOperations:\n  purge [-older-than 720h]   drop payloads\n                           (retention.payload_age ...)\n  retention                 drop partitions\n"
	require.True(t, usageHasCommand(usage, "purge"))
	require.True(t, usageHasCommand(usage, "retention"))
	require.False(t, usageHasCommand(usage, "payloads"))
	require.False(t, usageHasCommand(strings.Replace(usage, "  retention ", "  maintain ", 1), "retention"))
}

func TestStorageBaselineConfigLoadsAndOnlyTheNewSideNamesPartitionKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := &bench{opts: options{partitions: 12}}
	today := &storageSide{key: "today", label: "today"}
	y, err := b.retentionYAML(today, 3*time.Minute, time.Minute, true)
	require.NoError(t, err)
	require.NotContains(t, y, "partition_interval")
	path, auth, err := b.pipeConfig(dir, "today.yaml", y)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(auth, "Basic "))
	// Today's config package must take the generated file whole: a key it
	// does not know fails its strict decoding.
	cfg, err := config.Load(path)
	require.NoError(t, err)
	require.Equal(t, 3*time.Minute, cfg.Retention.PayloadAge)
	require.Equal(t, time.Second, cfg.Retention.MinPurgeAge)

	noPurge, err := b.retentionYAML(today, 3*time.Minute, time.Minute, false)
	require.NoError(t, err)
	require.NotContains(t, noPurge, "payload_age", "a pass run by hand, not by every reconciler round")

	nw := &storageSide{key: "new", label: "new", newKeys: true}
	y, err = b.retentionYAML(nw, 3*time.Minute, time.Minute, false)
	require.NoError(t, err)
	for _, k := range []string{"partition_interval: 1m0s", "history_age: 3m0s", "dead_payload_age: 3m0s"} {
		require.Contains(t, y, k)
	}
	// This checkout's config package takes the new side's file whole.
	path, _, err = b.pipeConfig(dir, "new.yaml", y)
	require.NoError(t, err)
	cfg, err = config.Load(path)
	require.NoError(t, err)
	require.Equal(t, time.Minute, cfg.Retention.PartitionInterval)
	require.Equal(t, 3*time.Minute, cfg.Retention.PayloadAge)
	require.Equal(t, 840*time.Hour, cfg.Retention.IdentityAge, "a pass run by hand drops bodies and keeps identities (the default age), as today's does")
	soak, err := b.retentionYAML(nw, 3*time.Minute, time.Minute, true)
	require.NoError(t, err)
	require.Contains(t, soak, "identity_age: 3m0s", "in the soak identities leave at the horizon too (dev allows it)")
	own := filepath.Join(dir, "own.yaml")
	require.NoError(t, os.WriteFile(own, []byte("retention:\n  payload_age: 1h\n"), 0o600))
	b.opts.storageNewConfig = own
	y, err = b.retentionYAML(nw, 3*time.Minute, time.Minute, false)
	require.NoError(t, err)
	require.Equal(t, "retention:\n  payload_age: 1h\n", y, "-storage-new-config replaces the generated keys")
}

func TestStorageDatabasesAreNeverTheBenchDatabaseItself(t *testing.T) {
	t.Parallel()
	u, name, err := storageDBURL("postgres://u:pw@db.example:5433/hookyard_bench?sslmode=disable", "today")
	require.NoError(t, err)
	require.Equal(t, "hookyard_bench_storage_today", name)
	require.Equal(t, "postgres://u:pw@db.example:5433/hookyard_bench_storage_today?sslmode=disable", u)
	_, _, err = storageDBURL("postgres://u@db.example:5433?sslmode=disable", "new")
	require.Error(t, err)
}

func TestPostgresCPUNeverLosesWhatAnEndedProcessUsed(t *testing.T) {
	t.Parallel()
	s0 := pgCPUSample{procs: map[int]float64{1: 10, 2: 5, 3: 40}}
	// 3 ended (its 40 s gone from /proc), 4 started, 2 is the database's.
	s1 := pgCPUSample{procs: map[int]float64{1: 12, 2: 6.5, 4: 0.25}, own: []int{2}}
	all, own := s1.since(s0)
	require.InDelta(t, 2+1.5+0.25, all, 1e-9)
	require.InDelta(t, 1.5, own, 1e-9)
}

func TestPostgresCPUFindsAProcessByItsParent(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("sleep", "5")
	require.NoError(t, cmd.Start())
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	require.True(t, slices.Contains(childPIDs(os.Getpid()), cmd.Process.Pid))
}

func TestStorageQuickShrinksOnlyWhatIsNotGiven(t *testing.T) {
	t.Parallel()
	o, err := parseFlags([]string{"-storage", "-storage-quick", "-soak-duration", "5m", "-storage-parts", "soak,purge"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, 10_000, o.storageEvents)
	require.Equal(t, 1_000_000, o.storagePurgeRows)
	require.Equal(t, 5*time.Minute, o.soakDuration, "given explicitly")
	require.Equal(t, time.Minute, o.soakInterval, "the new layout's partitions are whole minutes")
	require.Equal(t, map[string]bool{"soak": true, "purge": true}, o.storageParts)
	require.Equal(t, map[string]bool{"today": true, "new": true}, o.storageSides, "both layouts unless told")
	o, err = parseFlags([]string{"-storage", "-storage-sides", "new"}, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"new": true}, o.storageSides)
	_, err = parseFlags([]string{"-storage", "-storage-sides", "tomorrow"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "tomorrow")
	require.False(t, o.pipeline, "-storage alone runs no other section")

	_, err = parseFlags([]string{"-storage", "-storage-parts", "vacuum"}, &bytes.Buffer{})
	require.ErrorContains(t, err, "vacuum")
	o, err = parseFlags(nil, &bytes.Buffer{})
	require.NoError(t, err)
	require.False(t, o.storage, "the default run leaves the hour-long storage section out")
}

func TestStorageLadderGoesUpUntilAMissOrDownUntilAHold(t *testing.T) {
	t.Parallel()
	walk := func(holds func(rate float64) bool) (tried []float64, best float64) {
		rate, down := 4000.0, false
		for range 12 {
			tried = append(tried, rate)
			next, held, stop := ladderNext(rate, 1.25, holds(rate), len(tried) == 1, &down)
			if held {
				best = rate
			}
			if stop {
				break
			}
			rate = next
		}
		return tried, best
	}
	tried, best := walk(func(r float64) bool { return r <= 6000 })
	require.Equal(t, []float64{4000, 5000, 6250}, tried, "up by 1.25 until the first miss")
	require.Equal(t, 5000.0, best)
	tried, best = walk(func(r float64) bool { return r <= 1500 })
	require.Equal(t, []float64{4000, 2000, 1000}, tried, "the start missed: halving until one holds")
	require.Equal(t, 1000.0, best)
	tried, best = walk(func(float64) bool { return false })
	require.Len(t, tried, 12, "never holds: stops after the steps it was given")
	require.Zero(t, best)
}
