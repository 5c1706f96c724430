package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/processor"
)

// inboxSchema is where section B3 runs: a schema created fresh for each
// inbox size, so that its tables have no statistics, as in a new database.
const inboxSchema = "bench_inbox_size"

// inboxTables are the tables B3 keeps autovacuum off on, so that no
// statistics appear while it measures.
var inboxTables = []string{"webhook_inbox", "webhook_inbox_body", "outbox", "projection", "projection_history", "partition_fence", "topic_fence", "fact", "action"}

// preloadFinishedSQL writes $1 processed events of the measured account
// (spread over $1/10 other subscriptions) with generate_series: the history
// an inbox carries. Every row shares provider, account and environment with
// the measured events, so an index led by those columns narrows nothing.
// As intake stores them: the ledger row with body_at, its body once in
// webhook_inbox_body at stored_at = body_at (now(), in the partition intake
// writes to).
const preloadFinishedSQL = `
WITH ledger AS (
    INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type,
        resource_type, resource_id, resource_version, body_at, status, outcome, processed_at, received_at)
    SELECT $2, $3, $4, 'old_' || g, $5, 'subscription_changed', 'subscription', 'sub_old_' || (g % greatest($1 / 10, 1)), g,
           now(), 'processed', 'applied', now() - interval '1 hour', now() - interval '1 hour' - ($1 - g) * interval '1 millisecond'
    FROM generate_series(1, $1::int) g
)
INSERT INTO webhook_inbox_body (provider, source_account, environment, event_id, stored_at, body)
SELECT $2, $3, $4, 'old_' || g, now(),
       convert_to(jsonb_build_object('id', 'old_' || g, 'event_type', 'subscription_changed',
           'content', jsonb_build_object('subscription', jsonb_build_object('id', 'sub_old_' || (g % greatest($1 / 10, 1)),
               'status', 'active', 'resource_version', g, 'plan_id', 'basic-monthly', 'customer_id', 'cus_' || g)))::text, 'UTF8')
FROM generate_series(1, $1::int) g`

// inboxResult is one inbox size: the processor with no statistics, then
// again after ANALYZE.
type inboxResult struct {
	rows                int
	preload             time.Duration
	cold, analyzed      procResult
	coldErr, analyzeErr error // a run that failed (a processor stuck in a query past the timeout)
	coldOK              bool
}

// inboxSection measures the processor's events/s on inboxes of each
// -inbox-rows size: the cost per event must not grow with the inbox.
func (b *bench) inboxSection(ctx context.Context) error {
	var results []inboxResult
	for _, rows := range b.opts.inboxRows {
		r, err := b.inboxRun(ctx, rows)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	b.printInbox(results)
	return nil
}

func (b *bench) inboxRun(ctx context.Context, rows int) (inboxResult, error) {
	res := inboxResult{rows: rows}
	admin := b.pool
	if _, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+inboxSchema+` CASCADE`); err != nil {
		return res, fmt.Errorf("drop inbox bench schema: %w", err)
	}
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+inboxSchema); err != nil {
		return res, fmt.Errorf("create inbox bench schema: %w", err)
	}
	defer func() {
		// A fresh context: the run's may have ended, the schema must go.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_, _ = admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+inboxSchema+` CASCADE`)
	}()
	opts := db.Options{MaxConns: 4, SearchPath: inboxSchema, ApplicationName: "hookyard-bench-inbox"}
	pool, err := db.Open(ctx, b.opts.dbURL, opts)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool, b.log); err != nil {
		return res, err
	}
	if err := stopAutovacuum(ctx, pool, inboxTables); err != nil {
		return res, err
	}
	opts.MaxConns, opts.ApplicationName = int32(b.opts.procConns), "hookyard-bench-inbox-processor"
	procPool, err := db.Open(ctx, b.opts.dbURL, opts)
	if err != nil {
		return res, err
	}
	defer procPool.Close()

	b.step("processor at inbox size: preloading %s finished events (generate_series, not analyzed)", fmtInt(int64(rows)))
	start := time.Now()
	ep := cbEndpoint
	if _, err := pool.Exec(ctx, preloadFinishedSQL, rows, ep.Provider, ep.SourceAccount, ep.Environment, ep.ID); err != nil {
		return res, fmt.Errorf("preload finished events: %w", err)
	}
	res.preload = time.Since(start)

	// The sections above read and write through b.pool; point it at the
	// fresh schema for these runs.
	b.pool = pool
	defer func() { b.pool = admin }()
	if res.coldOK, err = b.noStatistics(ctx); err != nil {
		return res, err
	}
	// A run that fails is reported in the table, not as the section's
	// error: a plan that collapses is what this section is here to show.
	res.cold, res.coldErr = b.inboxProcessorRun(ctx, procPool, "no statistics", 1)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	// The second round's events carry the same subscriptions and versions:
	// without this they would all be stale. Events a timed-out first round
	// left pending have no record any more; they would keep the second
	// round from ever finishing.
	for _, q := range []string{`DELETE FROM projection`,
		`UPDATE webhook_inbox SET status = 'processed', outcome = 'bench: left by a timed-out round' WHERE status = 'pending'`} {
		if _, err := pool.Exec(ctx, q); err != nil {
			return res, fmt.Errorf("reset after the first round: %w", err)
		}
	}
	if err := analyze(ctx, pool, inboxTables); err != nil {
		return res, err
	}
	res.analyzed, res.analyzeErr = b.inboxProcessorRun(ctx, procPool, "analyzed", 2)
	return res, ctx.Err()
}

// noStatistics reports whether the inbox has neither column statistics nor
// a row count from VACUUM or ANALYZE.
func (b *bench) noStatistics(ctx context.Context) (bool, error) {
	var reltuples float64
	var stats int64
	err := b.pool.QueryRow(ctx, `
SELECT c.reltuples, (SELECT count(*) FROM pg_stats s WHERE s.schemaname = current_schema() AND s.tablename = 'webhook_inbox')
FROM pg_class c WHERE c.oid = 'webhook_inbox'::regclass`).Scan(&reltuples, &stats)
	if err != nil {
		return false, fmt.Errorf("read inbox statistics: %w", err)
	}
	return reltuples < 0 && stats == 0, nil
}

// inboxProcessorRun loads -inbox-events new versioned events (pending, with
// their records) on top of what the inbox holds and times the processor
// through them.
func (b *bench) inboxProcessorRun(ctx context.Context, procPool *pgxpool.Pool, label string, round uint64) (procResult, error) {
	res := procResult{path: label, events: b.opts.inboxEvents, poll: b.opts.pollRecords[0]}
	cluster, err := b.newCluster()
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	rng := rand.New(rand.NewPCG(b.opts.seed, 2_000_000+round))
	evs, mustApply := versionedEvents(rng, b.opts.inboxEvents, max(b.opts.inboxEvents/10, 1))
	// Each round's events are new identities; the earlier round's are
	// finished rows like the preloaded ones.
	for i := range evs {
		evs[i].id = fmt.Sprintf("r%d_%s", round, evs[i].id)
	}
	res.expectedOK = mustApply
	b.step("processor at inbox size, %s: %s new events", label, fmtInt(int64(len(evs))))
	if err := b.preloadEvents(ctx, cluster.ListenAddrs(), cbEndpoint, "subscription_changed", evs, false); err != nil {
		return res, err
	}
	cfg := processor.Config{Brokers: cluster.ListenAddrs(), Topic: benchTopic, Group: "bench",
		Endpoints: []provider.Endpoint{cbEndpoint}, MaxPollRecords: b.opts.pollRecords[0]}
	return b.runProcessor(ctx, procPool, cfg, res)
}

func (b *bench) printInbox(rs []inboxResult) {
	head := []string{"measure"}
	for _, r := range rs {
		head = append(head, fmtInt(int64(r.rows))+" inbox rows")
	}
	t := newTable(fmt.Sprintf("B3. Processor events/s by inbox size: %s new versioned events on top of the inbox, MaxPollRecords=%d",
		fmtInt(int64(b.opts.inboxEvents)), b.opts.pollRecords[0]), head...)
	add := func(name string, f func(inboxResult) string) {
		cells := []string{name}
		for _, r := range rs {
			cells = append(cells, f(r))
		}
		t.add(cells...)
	}
	add("preload (generate_series)", func(r inboxResult) string { return fmtDur(r.preload) })
	add("tables without statistics (checked)", func(r inboxResult) string { return fmt.Sprint(r.coldOK) })
	for _, s := range []struct {
		name string
		get  func(inboxResult) (procResult, error)
	}{
		{"no statistics", func(r inboxResult) (procResult, error) { return r.cold, r.coldErr }},
		{"analyzed", func(r inboxResult) (procResult, error) { return r.analyzed, r.analyzeErr }},
	} {
		add("events/s, "+s.name, func(r inboxResult) string {
			p, err := s.get(r)
			if err != nil {
				return fmt.Sprintf("%s (FAILED: %v)", fmtRate(p.rate()), err)
			}
			if p.timedOut {
				return fmt.Sprintf("%s (TIMEOUT, %s pending)", fmtRate(p.rate()), fmtInt(p.pendingLeft))
			}
			return fmtRate(p.rate())
		})
		add("events/s after first progress, "+s.name, func(r inboxResult) string {
			p, _ := s.get(r)
			return fmtRate(p.steadyRate())
		})
		add("batch time per event, "+s.name, func(r inboxResult) string {
			p, _ := s.get(r)
			if p.batches == 0 || p.processed() == 0 {
				return "n/a"
			}
			return fmtDur(time.Duration(p.batchSeconds / float64(p.processed()) * float64(time.Second)))
		})
	}
	t.note("Each size in a fresh schema with autovacuum off on its tables: the preloaded events are processed rows of the same account; the new events are COPYed pending and produced to an in-process kfake topic (%d partitions), and one processor (pool of %d conns) runs until none is pending, first on tables never analyzed, then again with new events after ANALYZE. The cost per event must not grow with the inbox.", b.opts.partitions, b.opts.procConns)
	b.emit(t)
}

// copyPending writes evs as pending inbox rows of ep with COPY, as intake
// stores them: the ledger rows with body_at, the bodies once in
// webhook_inbox_body at stored_at = body_at (now, in the partition intake
// writes to).
func copyPending(ctx context.Context, pool *pgxpool.Pool, ep provider.Endpoint, eventType string, evs []benchEvent) error {
	at := time.Now().Truncate(time.Microsecond)
	rows := make([][]any, len(evs))
	bodies := make([][]any, len(evs))
	for i, e := range evs {
		rows[i] = []any{ep.Provider, ep.SourceAccount, ep.Environment, e.id, ep.ID, eventType, "subscription", e.resource, e.version, at, "pending"}
		bodies[i] = []any{ep.Provider, ep.SourceAccount, ep.Environment, e.id, at, []byte(e.payload)}
	}
	cols := []string{"provider", "source_account", "environment", "event_id", "endpoint_id", "event_type",
		"resource_type", "resource_id", "resource_version", "body_at", "status"}
	bodyCols := []string{"provider", "source_account", "environment", "event_id", "stored_at", "body"}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"webhook_inbox"}, cols, pgx.CopyFromRows(rows)); err != nil {
			return fmt.Errorf("copy inbox rows: %w", err)
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"webhook_inbox_body"}, bodyCols, pgx.CopyFromRows(bodies)); err != nil {
			return fmt.Errorf("copy inbox bodies: %w", err)
		}
		return nil
	})
}

// stopAutovacuum turns autovacuum (and so auto-analyze) off on tables: on
// every leaf partition of a partitioned table (its parent has no storage
// and takes no storage parameters), on the table itself otherwise.
// Partitions created afterwards keep autovacuum on; the sections run within
// the partitions a fresh schema starts with (the migration's first covers
// three days). Tables an older layout lacks are left out.
func stopAutovacuum(ctx context.Context, pool *pgxpool.Pool, tables []string) error {
	have, err := existingTables(ctx, pool, tables)
	if err != nil {
		return err
	}
	for _, t := range have {
		rows, err := pool.Query(ctx, `SELECT relid::regclass::text FROM pg_partition_tree($1::regclass) WHERE isleaf`, t)
		if err != nil {
			return fmt.Errorf("stop autovacuum on %s: %w", t, err)
		}
		leaves, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("stop autovacuum on %s: %w", t, err)
		}
		for _, l := range leaves {
			if _, err := pool.Exec(ctx, `ALTER TABLE `+l+` SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)`); err != nil {
				return fmt.Errorf("stop autovacuum on %s: %w", l, err)
			}
		}
	}
	return nil
}
