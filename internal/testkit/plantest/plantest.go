// Package plantest checks which indexes the hot statements' plans read, on
// tables Postgres has no statistics for yet and on analyzed ones.
//
// A fresh database (`hookyard dev` on an empty Postgres, or any database
// before autovacuum's first ANALYZE) has none: every index created on an
// empty table says it holds 0 rows, so the planner sees ties between indexes
// that share leading columns and may pick the one that reads every row of an
// account for each key. The cost of such a plan grows with the table, and
// the pipeline slows to a stop long before anyone runs ANALYZE. Tests built
// on this package load many rows without analyzing them, prove that the
// tables have no statistics, and assert each statement's plan.
package plantest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// Rows is how many rows Load writes into each large table: enough that a
// plan reading a whole account, or a whole table, costs more than a probe.
const Rows = 100_000

// The identities the loaded rows use. Every inbox row shares provider,
// account and environment, as on a single-account installation: an index
// whose leading columns are those three narrows nothing.
const (
	Provider    = "chargebee"
	Account     = "dev-site"
	Environment = "test"
	Topic       = "hookyard.events"
	// Partitions of Topic in partition_fence.
	Partitions = 12
)

// EventID is the id of the n-th loaded inbox row (1 ≤ n ≤ Rows). Rows whose
// n%100 is below 80 are processed, below 95 pending, below 99 retrying, the
// rest dead: a backlog in progress.
func EventID(n int) string { return fmt.Sprintf("ev_%d", n) }

// ResourceID is the subscription of the n-th loaded inbox row; each one has
// ten events and a projection.
func ResourceID(n int) string { return fmt.Sprintf("sub_%d", n%(Rows/10)) }

// tables are the ones Load fills; autovacuum is off on each of them so that
// it cannot analyze them while a test runs.
var tables = []string{"webhook_inbox", "outbox", "projection",
	"partition_fence", "topic_fence", "fact", "action"}

// partitioned are the time-partitioned tables Load fills: autovacuum is off
// on each of their partitions, and Analyze analyzes them.
var partitioned = []string{"webhook_inbox_body", "projection_history"}

// statusOf is the status of the inbox row numbered n (see EventID).
func statusOf(n string) string {
	return fmt.Sprintf(`CASE WHEN %[1]s %% 100 < 80 THEN 'processed' WHEN %[1]s %% 100 < 95 THEN 'pending'
        WHEN %[1]s %% 100 < 99 THEN 'retrying' ELSE 'dead' END`, n)
}

var loadSQL = []string{`
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type,
    resource_type, resource_id, resource_version, body_at, status, outcome, attempts, next_attempt_at, processed_at, received_at)
SELECT $1, $2, $3, 'ev_' || g, 'chargebee-dev', 'subscription_changed', 'subscription', 'sub_' || (g % ($4 / 10)), g,
       date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC',
       s.status, CASE WHEN s.status = 'processed' THEN 'applied' END,
       CASE WHEN s.status IN ('retrying', 'dead') THEN 3 ELSE 0 END,
       CASE WHEN s.status = 'retrying' THEN now() + (g % 600) * interval '1 second' END,
       CASE WHEN s.status IN ('processed', 'dead') THEN now() END,
       now() - ($4 - g) * interval '10 milliseconds'
FROM generate_series(1, $4::int) g, LATERAL (SELECT ` + statusOf("g") + ` AS status) s`, `
INSERT INTO webhook_inbox_body (provider, source_account, environment, event_id, stored_at, body)
SELECT $1, $2, $3, 'ev_' || g, date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', '{"content":{"subscription":{"status":"active"}}}'
FROM generate_series(1, $4::int) g`, `
INSERT INTO outbox (message_key, message)
SELECT concat_ws('/', $1::text, $2::text, $3::text, 'subscription', 'sub_' || (g % ($4 / 10))),
       '{"kind":"event","event_id":"ev_' || g || '"}'
FROM generate_series(1, $4::int) g`, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id,
    provider_version, state, status, fence_generation)
SELECT $1, $2, $3, 'subscription', 'sub_' || g, g, '{"status":"active"}', 'active', 1
FROM generate_series(0, $4::int / 10 - 1) g`, `
INSERT INTO projection_history (provider, source_account, environment, resource_type, resource_id, event_id, outcome, fence_generation)
SELECT $1, $2, $3, 'subscription', 'sub_' || (g % ($4 / 10)), 'ev_' || g, 'applied', 1
FROM generate_series(1, $4::int) g`, `
INSERT INTO fact (provider, source_account, environment, fact_type, fact_id, resource_type, resource_id, event_id, data)
SELECT $1, $2, $3, 'invoice_paid', 'inv_' || g, 'subscription', 'sub_' || (g % ($4 / 10)), 'ev_' || g, '{}'
FROM generate_series(1, $4::int / 10) g`, `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status)
SELECT $1, $2, $3, 'inv_' || g, 'receipt', 'ev_' || g, CASE WHEN g % 10 = 0 THEN 'pending' ELSE 'done' END
FROM generate_series(1, $4::int / 10) g`,
}

// Load switches autovacuum off on the hot tables of the pool's schema and
// fills them without analyzing: Rows inbox rows (a backlog in progress, see
// EventID), as many outbox and history rows, a projection per resource, and
// the fences of Topic. It fails when any of them has statistics afterwards.
func Load(t testing.TB, pool *pgxpool.Pool) { LoadRows(t, pool, Rows) }

// LoadRows is Load with rows inbox rows instead of Rows (benchmarks load a
// million); EventID and ResourceID name them only when rows is Rows.
func LoadRows(t testing.TB, pool *pgxpool.Pool, rows int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute*time.Duration(max(1, rows/Rows)))
	defer cancel()
	for _, tbl := range tables {
		_, err := pool.Exec(ctx, `ALTER TABLE `+tbl+` SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)`)
		require.NoError(t, err, "stop autovacuum on %s", tbl)
	}
	for _, parent := range partitioned {
		_, err := pool.Exec(ctx, `DO $$ DECLARE p regclass; BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = '`+parent+`'::regclass LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)', p);
    END LOOP; END $$`)
		require.NoError(t, err, "stop autovacuum on the partitions of %s", parent)
	}
	for _, q := range loadSQL {
		_, err := pool.Exec(ctx, q, Provider, Account, Environment, rows)
		require.NoError(t, err, "load: %s", q)
	}
	_, err := pool.Exec(ctx, `INSERT INTO topic_fence (topic, partition_count) VALUES ($1, $2)`, Topic, Partitions)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO partition_fence (topic, partition, generation, owner)
SELECT $1, g, 1, 'plantest' FROM generate_series(0, $2::int - 1) g`, Topic, Partitions)
	require.NoError(t, err)
	RequireNoStatistics(t, pool)
}

// RequireNoStatistics fails unless every hot table of the pool's schema is
// as a fresh database has it: never analyzed (no pg_statistic rows, no
// ANALYZE recorded) and never vacuumed (reltuples -1, "unknown").
func RequireNoStatistics(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, `
SELECT c.relname, c.reltuples,
       (SELECT count(*) FROM pg_stats s WHERE s.schemaname = n.nspname AND s.tablename = c.relname),
       coalesce(st.analyze_count + st.autoanalyze_count + st.vacuum_count + st.autovacuum_count, 0)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_stat_user_tables st ON st.relid = c.oid
WHERE n.nspname = current_schema() AND c.relname = ANY($1)`, tables)
	require.NoError(t, err)
	seen, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (string, error) {
		var name string
		var reltuples float64
		var stats, runs int64
		if err := row.Scan(&name, &reltuples, &stats, &runs); err != nil {
			return "", err
		}
		require.Equal(t, float64(-1), reltuples, "%s: reltuples says the table was vacuumed or analyzed", name)
		require.Zero(t, stats, "%s has column statistics", name)
		require.Zero(t, runs, "%s was vacuumed or analyzed", name)
		return name, nil
	})
	require.NoError(t, err)
	require.ElementsMatch(t, tables, seen)
}

// Analyze gathers statistics on the hot tables, as autovacuum would.
func Analyze(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := pool.Exec(ctx, `ANALYZE `+strings.Join(append(slices.Clone(tables), partitioned...), ", "))
	require.NoError(t, err)
}

// AnalyzeAtRest gathers statistics as autovacuum takes them on a quiet
// system (every loaded event finished, no open action, the outbox empty),
// then puts the backlog back. The planner now believes that no row is
// pending or retrying and that the outbox is empty, so every partial index
// on unfinished rows looks empty while it holds thousands of rows: the state
// in which a burst of traffic arrives.
func AnalyzeAtRest(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, q := range []string{
		`CREATE TABLE plantest_outbox AS SELECT * FROM outbox`,
		`DELETE FROM outbox`,
		`UPDATE webhook_inbox SET status = 'processed' WHERE status <> 'processed'`,
		`UPDATE action SET status = 'done' WHERE status <> 'done'`,
		`ANALYZE ` + strings.Join(append(slices.Clone(tables), partitioned...), ", "),
		`INSERT INTO outbox SELECT * FROM plantest_outbox`,
		`UPDATE webhook_inbox SET status = ` + statusOf("substr(event_id, 4)::int") + `
WHERE substr(event_id, 4)::int % 100 >= 80`,
		`UPDATE action SET status = 'pending' WHERE substr(subject_id, 5)::int % 10 = 0`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err, "analyze at rest: %s", q)
	}
}

// Run loads the tables (Load) and checks cases in three states: without
// statistics, analyzed at rest then given a backlog (AnalyzeAtRest), and
// analyzed in that backlog (Analyze).
func Run(t *testing.T, pool *pgxpool.Pool, cases []Case) {
	t.Helper()
	Load(t, pool)
	t.Run("no statistics", func(t *testing.T) { Check(t, pool, false, cases) })
	AnalyzeAtRest(t, pool)
	t.Run("analyzed at rest, then a backlog", func(t *testing.T) { Check(t, pool, true, cases) })
	Analyze(t, pool)
	t.Run("analyzed in a backlog", func(t *testing.T) { Check(t, pool, true, cases) })
}

// PendingKeys returns n keys of loaded pending events, as four columns
// (provider, account, environment, event id) the way the batch statements
// take them.
func PendingKeys(n int) (p, a, e, id []string) {
	for i := range n {
		p, a, e, id = append(p, Provider), append(a, Account), append(e, Environment), append(id, EventID(100*i+85))
	}
	return p, a, e, id
}

// Case is one hot statement and the indexes its plan must read.
type Case struct {
	// Name says what the statement does.
	Name string
	SQL  string
	Args []any
	// Reads are the indexes the plan reads, every one of them: a sequential
	// scan, or another index, fails the case. An INSERT's conflict arbiter
	// counts as read.
	Reads []string
	// SmallTables are tables of a few rows (one per partition) that the
	// planner rightly reads whole once statistics say how small they are:
	// on analyzed tables a sequential scan of them passes too.
	SmallTables []string
	// TinyTables are tables that stay near empty by design (outbox_dead:
	// records the broker refused for good) and that a statement reads once,
	// not per row: a sequential scan of them passes with or without
	// statistics, as does their index.
	TinyTables []string
	// Settings are set_config calls (name → value) made before the
	// statement is planned, as the transaction that runs it makes them
	// (a batch of marks turns hash and merge joins off).
	Settings map[string]string
}

// accepts reports whether reads are the case's: exactly Reads, or, on
// analyzed tables, Reads with sequential scans of SmallTables instead of
// some of them.
func (c Case) accepts(reads []string, analyzed bool) bool {
	if len(c.TinyTables) > 0 {
		reads = slices.DeleteFunc(slices.Clone(reads), func(r string) bool {
			for _, tbl := range c.TinyTables {
				if r == "Seq Scan on "+tbl || strings.HasPrefix(r, tbl+"_") {
					return true
				}
			}
			return false
		})
	}
	if slices.Equal(reads, c.Reads) {
		return true
	}
	if !analyzed || len(c.SmallTables) == 0 {
		return false
	}
	for _, r := range reads {
		small := false
		for _, tbl := range c.SmallTables {
			small = small || r == "Seq Scan on "+tbl
		}
		if !small && !slices.Contains(c.Reads, r) {
			return false
		}
	}
	return true
}

// Check asserts each case's plan, both the one Postgres makes for these
// argument values (a custom plan) and the one it caches for any values (a
// generic plan): pgx prepares every statement, and after five executions
// Postgres may keep the generic one. analyzed says whether the tables have
// statistics (see Case.SmallTables).
func Check(t *testing.T, pool *pgxpool.Pool, analyzed bool, cases []Case) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	for _, c := range cases {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			t.Run(c.Name+"/"+mode, func(t *testing.T) {
				for name, value := range c.Settings {
					_, err := conn.Exec(ctx, `SELECT set_config($1, $2, false)`, pgx.QueryExecModeSimpleProtocol, name, value)
					require.NoError(t, err)
				}
				reads, plan := Reads(t, conn.Conn(), mode, c.SQL, c.Args...)
				for name := range c.Settings {
					_, err := conn.Exec(ctx, `RESET `+pgx.Identifier{name}.Sanitize(), pgx.QueryExecModeSimpleProtocol)
					require.NoError(t, err)
				}
				require.True(t, c.accepts(reads, analyzed), "%s (%s) reads %q, not %q; plan:\n%s", c.Name, mode, reads, c.Reads, plan)
			})
		}
	}
}

// Reads explains sql under plan_cache_mode mode and returns what its plan
// reads, sorted: index names, conflict arbiters, and "<Node Type> on
// <table>" for a table read without an index, with the plan as text.
func Reads(t testing.TB, conn *pgx.Conn, mode, sql string, args ...any) ([]string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `DEALLOCATE ALL`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `PREPARE plantest_hot AS `+sql, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err, "prepare %s", sql)
	params := make([]string, len(args))
	for i := range args {
		params[i] = fmt.Sprintf("$%d", i+1)
	}
	explain := `EXPLAIN (FORMAT JSON) EXECUTE plantest_hot`
	if len(args) > 0 {
		explain += "(" + strings.Join(params, ", ") + ")"
	}
	var out []byte
	err = conn.QueryRow(ctx, explain, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...).Scan(&out)
	require.NoError(t, err, "explain %s", sql)
	rows, err := conn.Query(ctx, strings.Replace(explain, "(FORMAT JSON)", "(COSTS OFF)", 1), append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	require.NoError(t, err, "explain %s", sql)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err, "explain %s", sql)
	var doc []struct {
		Plan node `json:"Plan"`
	}
	require.NoError(t, json.Unmarshal(out, &doc))
	require.Len(t, doc, 1)
	set := map[string]bool{}
	doc[0].Plan.reads(set)
	// A partition's table or index reads as its parent's, whichever
	// partitions exist when the test runs (time partitions are named by
	// date): webhook_inbox_body_p..._pkey is webhook_inbox_body_pkey.
	rows, err = conn.Query(ctx, `SELECT c.relname, p.relname FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
WHERE c.relnamespace = current_schema()::regnamespace`, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	parents := map[string]string{}
	for rows.Next() {
		var child, parent string
		require.NoError(t, rows.Scan(&child, &parent))
		parents[child] = parent
	}
	require.NoError(t, rows.Err())
	reads := make([]string, 0, len(set))
	seen := map[string]bool{}
	for r := range set {
		for {
			name := r
			prefix := ""
			if i := strings.Index(r, " on "); i >= 0 {
				prefix, name = r[:i+4], r[i+4:]
			}
			p, ok := parents[name]
			if !ok {
				break
			}
			r = prefix + p
		}
		if !seen[r] {
			seen[r] = true
			reads = append(reads, r)
		}
	}
	sort.Strings(reads)
	return reads, strings.Join(lines, "\n")
}

type node struct {
	NodeType  string   `json:"Node Type"`
	Relation  string   `json:"Relation Name"`
	Index     string   `json:"Index Name"`
	Arbiters  []string `json:"Conflict Arbiter Indexes"`
	Plans     []node   `json:"Plans"`
	Operation string   `json:"Operation"`
}

func (n node) reads(set map[string]bool) {
	switch {
	case n.Index != "":
		set[n.Index] = true
	case n.NodeType == "ModifyTable", n.NodeType == "Bitmap Heap Scan":
		// The target of a write is read by its subplan; a bitmap heap
		// scan by its bitmap index scans.
	case n.Relation != "":
		set[n.NodeType+" on "+n.Relation] = true
	}
	for _, a := range n.Arbiters {
		set[a] = true
	}
	for _, c := range n.Plans {
		c.reads(set)
	}
}
