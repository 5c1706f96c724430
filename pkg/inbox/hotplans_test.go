package inbox

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
	"github.com/hookyard/hookyard/pkg/partition"
	"github.com/hookyard/hookyard/pkg/provider"
)

// The inbox's statements that run for every event (intake) or every round
// of the processor's and reconciler's loops (retries, requeue) read the
// inbox through the index meant for them, on a fresh database without
// statistics as on an analyzed one: any other plan reads a share of the
// inbox that grows with it. Without statistics the planner once looked the
// processor's batches up through webhook_inbox_resource, reading every row
// of the account for each key: 40 keys took 10 s at 54k rows, and the
// pipeline stopped as the inbox grew. Each statement the processor runs per
// batch must read the inbox by its primary key, whatever the statistics.
// Every scrape counts the unfinished events
// through the partial index of each status only, whatever the statistics:
// the gauges must stay cheap on an inbox of millions, exactly when someone
// is watching them.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	p, a, e, id := plantest.PendingKeys(40)
	n := len(id)
	// Intake: 40 new events and one repeat of a stored one.
	newIDs := make([]string, n)
	for i := range newIDs {
		newIDs[i] = fmt.Sprintf("ev_new_%d", i)
	}
	newIDs[0] = plantest.EventID(1)
	text := func(v string) []string { return repeat(v, n) }
	versions, bodies, lastErr, occurred := make([]*int64, n), make([][]byte, n), make([]*string, n), make([]*time.Time, n)
	for i := range bodies {
		bodies[i] = []byte(`{"id":"ev"}`)
	}
	intake := []any{p, a, e, newIDs, text("chargebee-dev"), text("subscription_changed"), text("subscription"), text("sub_1"),
		versions, bodies, text(StatusPending), text("chargebee/dev-site/test/subscription/sub_1"), text(`{"kind":"event"}`), lastErr, occurred, make([]*string, n), make([]*string, n)}
	now := time.Now()
	// The processor's batches: up to 1,000 events.
	bp, ba, be, bid := plantest.PendingKeys(1000)
	bn := len(bid)
	status, outcome := repeat("processed", bn), repeat("applied", bn)
	lastErrs, attempts, next := make([]*string, bn), make([]int32, bn), make([]*time.Time, bn)
	bodyAt := make([]time.Time, bn)
	for i := range bodyAt {
		bodyAt[i] = now
	}
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "intake", SQL: insertSQL, Args: intake,
			Reads: []string{"webhook_inbox_pkey"}},
		{Name: "enqueue due retries", SQL: fmt.Sprintf(enqueueSQL, dueSQL), Args: []any{"retry", now, 500},
			Reads: []string{"webhook_inbox_body_pkey", "webhook_inbox_pkey", "webhook_inbox_retry_due"}},
		{Name: "find published pending events", SQL: stuckSQL, Args: []any{now.Add(-time.Minute), 500},
			Reads: []string{"outbox_pkey", "webhook_inbox_body_pkey", "webhook_inbox_pending"}, TinyTables: []string{"outbox_dead"}},
		{Name: "requeue lost events", SQL: fmt.Sprintf(enqueueSQL, lostSQL), Args: []any{"requeue", p, a, e, id, make([]time.Time, n), text(StatusPending)},
			Reads: []string{"webhook_inbox_body_pkey", "webhook_inbox_pkey"}},
		{Name: "replay listed events", SQL: fmt.Sprintf(enqueueSQL, replayManySQL) + replayedReturning, Args: []any{"replay", p, a, e, id},
			Reads: []string{"webhook_inbox_body_pkey", "webhook_inbox_pkey"}},
		{Name: "load a batch's inbox rows", SQL: loadSQL, Args: []any{bp, ba, be, bid},
			Reads: []string{"webhook_inbox_pkey"}},
		{Name: "load a batch's bodies", SQL: loadBodiesSQL, Args: []any{bp, ba, be, bid, bodyAt},
			Reads: []string{"webhook_inbox_body_pkey"}},
		{Name: "mark a batch's events", SQL: markSQL, Args: []any{bp, ba, be, bid, status, outcome, lastErrs, attempts, next, make([]*time.Time, bn), repeat("pending", bn)},
			Reads: []string{"webhook_inbox_pkey"}, Settings: markSettings},
		{Name: "mark a poison event dead", SQL: markDeadSQL, Args: []any{bp[0], ba[0], be[0], bid[0], "rejected", []string{"pending"}},
			Reads: []string{"webhook_inbox_pkey"}},
		{Name: "inbox backlog gauges", SQL: backlogSQL,
			Reads: []string{"webhook_inbox_dead", "webhook_inbox_pending", "webhook_inbox_retry_due"}},
	})
}

// The payload purge runs every reconciler round on an inbox whose older
// finished rows were purged by earlier rounds: only the newest hold a
// payload. It must read those through webhook_inbox_purgeable, not walk
// every row received before the cutoff (a cost that grows with the inbox,
// every round), with or without statistics. Fails without migration 00015.
func TestPurgeReadsOnlyRowsThatStillHoldAPayload(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	plantest.Load(t, s.Pool)
	// Earlier rounds purged every finished row but the newest 2% of the
	// inbox (received in the last 20 s of the loaded 1,000 s).
	_, err := s.Pool.Exec(t.Context(), `UPDATE webhook_inbox SET payload = NULL
WHERE status = 'processed' AND received_at < now() - interval '20 seconds'`)
	require.NoError(t, err)
	purge := []plantest.Case{{Name: "purge payloads", SQL: purgeSQL, Args: []any{time.Now().Add(-10 * time.Second), 500},
		Reads: []string{"webhook_inbox_pkey", "webhook_inbox_purgeable"}}}
	plantest.RequireNoStatistics(t, s.Pool)
	t.Run("no statistics", func(t *testing.T) { plantest.Check(t, s.Pool, false, purge) })
	plantest.Analyze(t, s.Pool)
	t.Run("analyzed", func(t *testing.T) { plantest.Check(t, s.Pool, true, purge) })
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// The retention statements run every reconciler round (forgetting
// identities) or before every partition drop (keeping unfinished bodies):
// each reads only the rows it is about, through their indexes, with or
// without statistics. Forgetting walks webhook_inbox_received from the
// oldest row; keeping bodies reads the partial indexes of unfinished
// statuses, never the finished history.
func TestRetentionStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	now := time.Now()
	day := now.UTC().Truncate(24 * time.Hour)
	cases := []plantest.Case{
		{Name: "forget identities", SQL: forgetSQL, Args: []any{now.Add(-995 * time.Second), now.Add(-995 * time.Second), 1000},
			Reads: []string{"Tid Scan on webhook_inbox", "webhook_inbox_body_pkey", "webhook_inbox_received"}},
		{Name: "keep unfinished bodies", SQL: rescueSQL, Args: []any{day, day.Add(24 * time.Hour), now, now.Add(-14 * 24 * time.Hour)},
			Reads: []string{"Tid Scan on webhook_inbox", "webhook_inbox_body_pkey", "webhook_inbox_dead", "webhook_inbox_pending", "webhook_inbox_retry_due"}},
	}
	plantest.Run(t, s.Pool, cases)
}

// A batch's bodies are read from their partitions only, whatever the body
// table counts: each plan a statement holds costs every execution a lock
// and an opened index per partition. Load reads each partition's bodies
// from that partition by name (partitionBodiesSQL: the plan holds it
// alone); what its cache of partitions cannot place is read through the
// parent with a plan made for the batch's stored_at values
// (loadBodiesSQL with bodyBatchSQL), which keeps only their partitions.
// Fails if the named statement reads another partition, if the parent's
// statement loses its "stored_at = ANY($5)" or its plan per execution, or
// if Load fails on a partition dropped after its cache was read.
func TestBodyReadsPlanOnlyThePartitionsOfTheirBatch(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	m := partition.Maintainer{Pool: s.Pool, Tables: []partition.Table{BodyTable(time.Minute, 0, 0, time.Now)}}
	_, err := m.Ensure(ctx, time.Now().Add(3*24*time.Hour)) // minute partitions beside the first one
	require.NoError(t, err)
	parts, err := partition.List(ctx, s.Pool, BodyTableName)
	require.NoError(t, err)
	require.Greater(t, len(parts), 10)

	ep := &provider.Endpoint{ID: "e", Provider: "stripe", SourceAccount: "a", Environment: "test"}
	rec := &Record{Endpoint: ep, Event: provider.Event{ID: "evt_1", Type: "t", Payload: []byte(`{"id":"evt_1"}`)}}
	_, err = Insert(ctx, s.Pool, []*Record{rec}, time.Now())
	require.NoError(t, err)
	var at time.Time
	var part string
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT w.body_at, b.tableoid::regclass::text FROM webhook_inbox w
JOIN webhook_inbox_body b USING (provider, source_account, environment, event_id) WHERE event_id = 'evt_1'`).Scan(&at, &part))
	args := []any{[]string{"stripe"}, []string{"a"}, []string{"test"}, []string{"evt_1"}, []time.Time{at}}

	held := func(plan []string) (n int) {
		for _, l := range plan {
			if strings.Contains(l, " on webhook_inbox_body_p") {
				n++
			}
		}
		return n
	}
	// A session that caches one plan for any values, as Postgres may after
	// five executions of a prepared statement.
	conn, err := s.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	simple := pgx.QueryExecModeSimpleProtocol
	explain := func(settings, sql string, args ...any) []string {
		for _, q := range []string{`SET plan_cache_mode = force_generic_plan`, `BEGIN`, settings, `PREPARE body_read AS ` + sql} {
			_, err := conn.Exec(ctx, q, simple)
			require.NoError(t, err, q)
		}
		params := make([]string, len(args))
		for i := range params {
			params[i] = fmt.Sprintf("$%d", i+1)
		}
		rows, err := conn.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE body_read(`+strings.Join(params, ", ")+`)`, append([]any{simple}, args...)...)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, q := range []string{`ROLLBACK`, `DEALLOCATE body_read`, `RESET plan_cache_mode`} {
			_, err := conn.Exec(ctx, q, simple)
			require.NoError(t, err, q)
		}
		return lines
	}

	named := explain(bodyProbesSQL, partitionBodiesSQL(part), args...)
	require.Equal(t, 1, held(named), "the named partition alone; plan:\n%s", strings.Join(named, "\n"))
	require.Contains(t, strings.Join(named, "\n"), "Index Scan using "+part+"_pkey on "+part)
	// The rows' read, with the bodies of the partition of now.
	joined := explain(bodyProbesSQL, loadWithBodiesSQL(part), args[:4]...)
	require.Equal(t, 1, held(joined), "the named partition alone; plan:\n%s", strings.Join(joined, "\n"))
	require.Contains(t, strings.Join(joined, "\n"), "Index Scan using "+part+"_pkey on "+part)

	parent := explain(bodyBatchSQL, loadBodiesSQL, args...)
	plan := strings.Join(parent, "\n")
	require.Equal(t, 1, held(parent), "the plan holds one partition of %d; plan:\n%s", len(parts), plan)
	// A plan cached for any values prunes when it starts, and says so; it
	// has locked every partition by then.
	require.NotContains(t, plan, "Subplans Removed", "a plan for these values, not a cached one; plan:\n%s", plan)

	got, err := Load(ctx, s.Pool, []Key{rec.Key()})
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"evt_1"}`, string(got[rec.Key()].Payload))
	// The partition goes after Load read the partitions: the next Load
	// finds no body (as once purged), and no error.
	_, err = s.Pool.Exec(ctx, `DROP TABLE `+pgx.Identifier{part}.Sanitize())
	require.NoError(t, err)
	got, err = Load(ctx, s.Pool, []Key{rec.Key()})
	require.NoError(t, err)
	require.Nil(t, got[rec.Key()].Payload)
}

// A partition analyzed while empty (partitions are created ahead; an
// ANALYZE of the table reaches them before they fill) looks free to scan,
// and a plan cached then keeps that view while the partition fills: each
// body lookup of the processor's batches would read the partition that
// receives the day's bodies whole. The statements that probe bodies must
// keep probing by primary key whatever the partition's statistics said when
// their plan was made. The pool below makes every plan the cached generic
// one at once; the partition's scan counters say how it was read. Fails when
// probed stops turning sequential scans off (bodyProbesSQL).
func TestBodyProbesStayProbesWhenAPartitionFillsAfterItsPlan(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	m := partition.Maintainer{Pool: s.Pool, Tables: []partition.Table{BodyTable(time.Hour, 0, 0, time.Now)}}
	_, err := m.Ensure(ctx, time.Now().Add(24*time.Hour))
	require.NoError(t, err)
	_, err = s.Pool.Exec(ctx, `ANALYZE webhook_inbox_body`)
	require.NoError(t, err)

	cfg := s.Pool.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	cached, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer cached.Close()

	ep := &provider.Endpoint{ID: "e", Provider: "stripe", SourceAccount: "a", Environment: "test"}
	record := func(id string) *Record {
		return &Record{Endpoint: ep, Event: provider.Event{ID: id, Type: "t", Payload: []byte(`{"id":"` + id + `","padding":"` + strings.Repeat("x", 200) + `"}`)}}
	}
	// The plans are made now, while every partition is known to be empty.
	key := func(id string) Key {
		return Key{Provider: "stripe", SourceAccount: "a", Environment: "test", EventID: id}
	}
	_, err = Load(ctx, cached, []Key{key("evt_none")})
	require.NoError(t, err)
	_, err = EnqueueDue(ctx, cached, time.Now(), 10)
	require.NoError(t, err)

	// The partition of now fills.
	var recs []*Record
	for i := range 3000 {
		recs = append(recs, record(fmt.Sprintf("evt_%d", i)))
	}
	_, err = Insert(ctx, s.Pool, recs, time.Now())
	require.NoError(t, err)
	var part string
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM webhook_inbox_body WHERE event_id = 'evt_7'`).Scan(&part))
	scans := func() (seq, idx int64) {
		_, err := s.Pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
		require.NoError(t, err)
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT coalesce(seq_scan, 0), coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relid = $1::regclass`, part).Scan(&seq, &idx))
		return seq, idx
	}
	seq0, idx0 := scans()

	// The same statements, their cached plans, on the filled partition.
	loaded, err := Load(ctx, cached, []Key{key("evt_7"), key("evt_2999")})
	require.NoError(t, err)
	require.Len(t, loaded, 2)
	require.NotNil(t, loaded[key("evt_7")].Payload)
	_, err = cached.Exec(ctx, `SELECT pg_stat_force_next_flush()`)
	require.NoError(t, err)
	var seq1, idx1 int64
	require.Eventually(t, func() bool {
		seq1, idx1 = scans()
		return seq1+idx1 > seq0+idx0
	}, 30*time.Second, 50*time.Millisecond, "the cached connection's statistics reach pg_stat_user_tables")
	require.Zero(t, seq1-seq0, "the filled partition %s was scanned whole %d times by a cached body probe", part, seq1-seq0)
	require.Positive(t, idx1-idx0)
}

// The processor reads a batch of events received now, bodies included, in
// one round trip (loadWithBodiesSQL), and the bodies of older events from
// their own partitions after; a purged body is nil wherever it was. Fails
// when Load reads the rows and the bodies of now in two round trips, or
// when it takes a body for a row from a partition that does not hold the
// row's body_at.
func TestLoadReadsTheBodiesOfNowWithTheRows(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	now := time.Now()
	// A partition for the day before the migration's first one, which
	// holds now.
	parts, err := partition.List(ctx, s.Pool, BodyTableName)
	require.NoError(t, err)
	require.Len(t, parts, 1)
	first := *parts[0].From
	_, err = s.Pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE webhook_inbox_body_before PARTITION OF webhook_inbox_body FOR VALUES FROM ('%s') TO ('%s')`,
		first.Add(-24*time.Hour).UTC().Format(time.RFC3339), first.UTC().Format(time.RFC3339)))
	require.NoError(t, err)

	ep := &provider.Endpoint{ID: "e", Provider: "stripe", SourceAccount: "a", Environment: "test"}
	rec := func(id string) *Record {
		return &Record{Endpoint: ep, Event: provider.Event{ID: id, Type: "t", Payload: []byte(`{"id":"` + id + `"}`)}}
	}
	fresh, purged, old := rec("evt_now"), rec("evt_now_purged"), rec("evt_old")
	_, err = Insert(ctx, s.Pool, []*Record{fresh, purged, old}, now)
	require.NoError(t, err)
	// Stored the day before (bodies are stored at the database's now()).
	for _, table := range []string{"webhook_inbox_body SET stored_at", "webhook_inbox SET body_at"} {
		_, err = s.Pool.Exec(ctx, `UPDATE `+table+` = $1 WHERE event_id = 'evt_old'`, first.Add(-time.Hour))
		require.NoError(t, err)
	}
	_, err = s.Pool.Exec(ctx, `DELETE FROM webhook_inbox_body WHERE event_id = 'evt_now_purged'`)
	require.NoError(t, err)
	var used int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(DISTINCT tableoid) FROM webhook_inbox_body`).Scan(&used))
	require.Equal(t, 2, used, "the bodies of now and of the day before in two partitions")

	pool, trace := s.Traced(t)
	load := func(recs ...*Record) (map[Key]*Loaded, int) {
		t.Helper()
		keys := make([]Key, len(recs))
		for i, r := range recs {
			keys[i] = r.Key()
		}
		trace.Reset()
		got, err := Load(ctx, pool, keys)
		require.NoError(t, err)
		require.Len(t, got, len(recs))
		return got, trace.RoundTrips()
	}
	load(fresh) // reads the partitions

	got, n := load(fresh, purged)
	require.Equal(t, 1, n, "rows and bodies of now in one round trip")
	require.JSONEq(t, `{"id":"evt_now"}`, string(got[fresh.Key()].Payload))
	require.Nil(t, got[purged.Key()].Payload)

	got, n = load(fresh, old, purged)
	require.Equal(t, 2, n, "the older body in a second round trip")
	require.JSONEq(t, `{"id":"evt_now"}`, string(got[fresh.Key()].Payload))
	require.JSONEq(t, `{"id":"evt_old"}`, string(got[old.Key()].Payload))
	require.Nil(t, got[purged.Key()].Payload)
}
