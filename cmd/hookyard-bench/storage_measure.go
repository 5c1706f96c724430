package main

// What the storage section reads from Postgres: bytes on disk per table
// group, WAL positions, dead tuples, Postgres's CPU; and the fill that
// writes rows into tables it knows only by their columns.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/retention"
)

// relSizesSQL sums pg_total_relation_size (heap, indexes, TOAST) of every
// table with storage in the schemas of the search path (a side's database
// has only hookyard's), a partition counted under the table it belongs to.
const relSizesSQL = `
SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text AS grp, sum(pg_total_relation_size(c.oid))::bigint
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'm') AND n.nspname = ANY (current_schemas(false))
GROUP BY 1`

// sizes is bytes on disk per table group, and the database's size.
type sizes struct {
	Groups   map[string]int64 `json:"groups"`
	Total    int64            `json:"total"`
	Database int64            `json:"database"`
}

func readSizes(ctx context.Context, pool *pgxpool.Pool) (sizes, error) {
	s := sizes{Groups: map[string]int64{}}
	rows, err := pool.Query(ctx, relSizesSQL)
	if err != nil {
		return s, fmt.Errorf("read relation sizes: %w", err)
	}
	for rows.Next() {
		var g string
		var n int64
		if err := rows.Scan(&g, &n); err != nil {
			rows.Close()
			return s, fmt.Errorf("read relation sizes: %w", err)
		}
		s.Groups[g] = n
		s.Total += n
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("read relation sizes: %w", err)
	}
	if err := pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&s.Database); err != nil {
		return s, fmt.Errorf("read database size: %w", err)
	}
	return s, nil
}

// walLSN is the server's current WAL insert position.
func walLSN(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var lsn string
	if err := pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		return "", fmt.Errorf("read WAL position: %w", err)
	}
	return lsn, nil
}

// walSince is the WAL written (by the whole server) since lsn.
func walSince(ctx context.Context, pool *pgxpool.Pool, lsn string) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn)::bigint`, lsn).Scan(&n); err != nil {
		return 0, fmt.Errorf("read WAL since %s: %w", lsn, err)
	}
	return n, nil
}

// deadTuples sums n_dead_tup over the search path's tables (partitions too).
// The statistics reach it within a second of a backend's transaction.
func deadTuples(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = ANY (current_schemas(false))`).Scan(&n); err != nil {
		return 0, fmt.Errorf("read dead tuples: %w", err)
	}
	return n, nil
}

// countInbox counts webhook_inbox's rows: the events the database retains
// (their identity, in either layout).
func countInbox(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count inbox rows: %w", err)
	}
	return n, nil
}

// pgCPUSample is CPU seconds used so far by each process of the Postgres
// server (postmaster and its children), and the pids of the backends
// connected to one database.
type pgCPUSample struct {
	procs map[int]float64
	own   []int
}

// since is the CPU the server's processes, and the database's backends,
// used between s0 and s: per process, so that one that ended in between
// (its CPU gone from /proc) takes nothing away from the others; one that
// started in between counts whole.
func (s pgCPUSample) since(s0 pgCPUSample) (all, own float64) {
	for pid, c := range s.procs {
		d := c - s0.procs[pid]
		if d < 0 { // a pid reused by a new process
			d = c
		}
		all += d
		if slices.Contains(s.own, pid) {
			own += d
		}
	}
	return all, own
}

// postgresCPU reads the server's processes from /proc: the postmaster's pid
// is the first line of postmaster.pid in the data directory. A process that
// ended between two samples takes its last CPU with it (the services'
// pooled connections live through a run; short ones are few).
func postgresCPU(ctx context.Context, pool *pgxpool.Pool) (pgCPUSample, error) {
	s := pgCPUSample{procs: map[int]float64{}}
	var dataDir string
	if err := pool.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir); err != nil {
		return s, fmt.Errorf("read data_directory: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return s, fmt.Errorf("read postmaster.pid (the server must run on this machine): %w", err)
	}
	first, _, _ := strings.Cut(string(raw), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return s, fmt.Errorf("postmaster.pid: %q is not a pid", first)
	}
	for _, pid := range append(childPIDs(pm), pm) {
		s.procs[pid] = procCPU(strconv.Itoa(pid))
	}
	rows, err := pool.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND application_name NOT LIKE 'hookyard-bench%'`)
	if err != nil {
		return s, fmt.Errorf("read backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return s, fmt.Errorf("read backends: %w", err)
	}
	for _, pid := range pids {
		s.own = append(s.own, int(pid))
	}
	return s, nil
}

// childPIDs lists the processes whose parent is ppid.
func childPIDs(ppid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		v, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(v)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state ppid ...
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// column is one column of a table to fill.
type column struct {
	name, typ           string
	notNull, hasDefault bool
	generated, identity bool
}

const columnsSQL = `
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atthasdef, a.attgenerated <> '', a.attidentity <> ''
FROM pg_attribute a WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`

func tableColumns(ctx context.Context, pool *pgxpool.Pool, table string) ([]column, error) {
	rows, err := pool.Query(ctx, columnsSQL, table)
	if err != nil {
		return nil, fmt.Errorf("read columns of %s: %w", table, err)
	}
	var cols []column
	for rows.Next() {
		var c column
		if err := rows.Scan(&c.name, &c.typ, &c.notNull, &c.hasDefault, &c.generated, &c.identity); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read columns of %s: %w", table, err)
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// fillBodyJSON is a Chargebee subscription_changed event of about 250
// bytes, for event g (a bigint column of generate_series).
const fillBodyJSON = `'{"id":"fill_' || g || '","occurred_at":' || extract(epoch FROM now())::bigint || ` +
	`',"event_type":"subscription_changed","api_version":"v2","content":{"subscription":{"id":"sub_' || (g % 10000) || ` +
	`'","status":"active","plan_id":"basic-monthly","currency_code":"USD","customer_id":"cus_' || (g % 10000) || ` +
	`'","resource_version":' || g || '}}}'`

// bodyExpr is the event's body as a value of type typ.
func bodyExpr(typ string) string {
	switch typ {
	case "jsonb", "json":
		return "(" + fillBodyJSON + ")::" + typ
	case "bytea":
		return "convert_to(" + fillBodyJSON + ", 'UTF8')"
	default:
		return fillBodyJSON
	}
}

// fillExpr is the value of column c for event g, by the column's name
// where it is one the inbox has, else by type for a column that needs a
// value; "" leaves the column to its default or NULL.
func fillExpr(c column) (string, error) {
	if c.generated || c.identity {
		return "", nil
	}
	body := func() string { return bodyExpr(c.typ) }
	switch c.name {
	case "provider":
		return "'chargebee'", nil
	case "source_account":
		return "'" + pipeSite + "'", nil
	case "environment":
		return "'test'", nil
	case "event_id":
		return "'fill_' || g", nil
	case "endpoint_id":
		return "'" + pipeEndpoint + "'", nil
	case "event_type":
		return "'subscription_changed'", nil
	case "resource_type":
		return "'subscription'", nil
	case "resource_id":
		return "'sub_' || (g % 10000)", nil
	case "resource_version":
		return "g", nil
	case "payload", "body":
		return body(), nil
	case "raw_body":
		// The receiver keeps raw bytes beside a JSON payload only when it
		// cannot keep the JSON: a Chargebee event has none.
		if c.notNull && !c.hasDefault {
			return body(), nil
		}
		return "", nil
	case "status":
		return "'processed'", nil
	case "outcome":
		return "'applied'", nil
	case "attempts":
		return "1", nil
	case "body_at", "stored_at":
		// The ledger row's body_at is its body's stored_at (readers join
		// on it): the chunk's time, $3, in a partition that exists.
		return "a.at", nil
	case "received_at", "processed_at":
		// clock_timestamp: rows of a long fill spread over the partitions
		// of the time it took, as if received then.
		return "clock_timestamp()", nil
	case "occurred_at":
		return "now()", nil
	}
	if !c.notNull || c.hasDefault {
		return "", nil
	}
	switch {
	case c.typ == "text" || strings.HasPrefix(c.typ, "character"):
		return "''", nil
	case slices.Contains([]string{"integer", "bigint", "smallint", "numeric", "real", "double precision"}, c.typ):
		return "0", nil
	case strings.HasPrefix(c.typ, "timestamp"):
		return "clock_timestamp()", nil
	case c.typ == "boolean":
		return "false", nil
	case c.typ == "jsonb" || c.typ == "json":
		return "'{}'", nil
	case c.typ == "bytea":
		return `'\x'`, nil
	case c.typ == "uuid":
		return "gen_random_uuid()", nil
	}
	return "", fmt.Errorf("column %s (%s) is NOT NULL without a default and the fill knows no value for it", c.name, c.typ)
}

// fillSQL is an INSERT … SELECT over generate_series($1, $2) into table,
// built from its columns; $3 is the chunk's time (body_at, stored_at).
func fillSQL(table string, cols []column) (string, error) {
	exprs := make([]string, len(cols))
	hasBody := false
	// A ledger with body_at keeps its bodies in the body table: its legacy
	// body columns stay empty, as for rows intake writes.
	ledger := table == "webhook_inbox" && slices.ContainsFunc(cols, func(c column) bool { return c.name == "body_at" })
	for i, c := range cols {
		e, err := fillExpr(c)
		if err != nil {
			return "", fmt.Errorf("fill %s: %w", table, err)
		}
		if ledger && (c.name == "payload" || c.name == "raw_body") && (!c.notNull || c.hasDefault) {
			e = ""
		}
		exprs[i] = e
		hasBody = hasBody || (e != "" && slices.Contains([]string{"payload", "body", "raw_body"}, c.name))
	}
	if !hasBody && table != "webhook_inbox" {
		// A body table whose body column has another name: its first
		// jsonb or bytea column carries the body, so that its size is real.
		for i, c := range cols {
			if !c.generated && !c.identity && slices.Contains([]string{"jsonb", "json", "bytea"}, c.typ) {
				exprs[i] = bodyExpr(c.typ)
				break
			}
		}
	}
	var names, vals []string
	for i, c := range cols {
		if exprs[i] == "" {
			continue
		}
		names = append(names, pgx.Identifier{c.name}.Sanitize())
		vals = append(vals, exprs[i])
	}
	if len(names) == 0 {
		return "", fmt.Errorf("fill %s: no column to fill", table)
	}
	return "INSERT INTO " + pgx.Identifier{table}.Sanitize() + " (" + strings.Join(names, ", ") + ")\nSELECT " +
		strings.Join(vals, ", ") + "\nFROM generate_series($1::bigint, $2::bigint) g, (SELECT $3::timestamptz AS at) a", nil
}

// fillTables are the tables the fill writes, those of them that exist:
// webhook_inbox, and the tables of -storage-body-tables (the new layout's
// bodies), every one with the same events.
func (b *bench) fillTables(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	var out []string
	for _, t := range append([]string{"webhook_inbox"}, strings.Split(b.opts.storageBodyTables, ",")...) {
		if t = strings.TrimSpace(t); t == "" {
			continue
		}
		var exists bool
		if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, t).Scan(&exists); err != nil {
			return nil, fmt.Errorf("look for %s: %w", t, err)
		}
		if exists {
			out = append(out, t)
		}
	}
	return out, nil
}

// fill writes rows processed events into every fill table, chunk events
// per statement (each its own transaction, as a receiver's would be).
func (b *bench) fill(ctx context.Context, pool *pgxpool.Pool, rows, chunk int, progress func(done int)) ([]string, error) {
	tables, err := b.fillTables(ctx, pool)
	if err != nil {
		return nil, err
	}
	stmts := make([]string, len(tables))
	for i, t := range tables {
		cols, err := tableColumns(ctx, pool, t)
		if err != nil {
			return nil, err
		}
		if stmts[i], err = fillSQL(t, cols); err != nil {
			return nil, err
		}
	}
	for lo := 1; lo <= rows; lo += chunk {
		hi := min(lo+chunk-1, rows)
		at := time.Now()
		if slices.Contains(tables, "webhook_inbox_body") {
			// The chunk's bodies go to the partition of now: create it
			// (and those ahead) as the services do, dropping nothing.
			// The interval is the new side's (-soak-interval).
			if _, err := retention.Ensure(ctx, pool, nil, retention.Policy{PartitionInterval: b.opts.soakInterval}, at); err != nil {
				return nil, fmt.Errorf("fill: partitions ahead: %w", err)
			}
		}
		for i, s := range stmts {
			if _, err := pool.Exec(ctx, s, lo, hi, at); err != nil {
				return nil, fmt.Errorf("fill %s: %w", tables[i], err)
			}
		}
		if progress != nil {
			progress(hi)
		}
	}
	return tables, nil
}

// dbWALStepSQL sums the WAL records from $1 up to the flushed end that
// touch a relation of database $2 (block references
// "rel <tablespace>/<db>/<rel>"), full-page images included; commit records
// name no relation and are left out. It returns the end it read to, where
// the next step starts.
const dbWALStepSQL = `
WITH e AS (SELECT pg_current_wal_flush_lsn() AS l)
SELECT CASE WHEN (SELECT l FROM e) > $1::pg_lsn THEN
         (SELECT coalesce(sum(record_length), 0) FROM pg_get_wal_records_info($1::pg_lsn, (SELECT l FROM e))
          WHERE block_ref LIKE '%rel %/' || $2::text || '/%')
       ELSE 0 END::bigint,
       greatest((SELECT l FROM e), $1::pg_lsn)::text`

// walMeter adds up, while a phase runs, the WAL written to one database's
// relations: the server's LSN difference counts every database's writes,
// this is the layout's own share. It reads with pg_walinspect (installed in
// the bench's own database) every couple of seconds, so that a checkpoint
// during a long phase does not recycle segments it has yet to read.
type walMeter struct {
	total int64
	err   error
	once  sync.Once
	stop  chan struct{}
	done  chan struct{}
}

// startWALMeter starts reading from lsn; nil when pg_walinspect is not
// available (said once).
func (b *bench) startWALMeter(ctx context.Context, dbName, lsn string) *walMeter {
	if b.walInspect == 0 {
		b.walInspect = -1
		if _, err := b.pool.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`); err == nil {
			b.walInspect = 1
		} else {
			b.step("storage: no per-database WAL (pg_walinspect: %v); the server's LSN difference only", err)
		}
	}
	if b.walInspect < 0 {
		return nil
	}
	m := &walMeter{stop: make(chan struct{}), done: make(chan struct{})}
	var oid uint32
	if m.err = b.pool.QueryRow(ctx, `SELECT oid FROM pg_database WHERE datname = $1`, dbName).Scan(&oid); m.err != nil {
		close(m.done)
		return m
	}
	db := strconv.FormatUint(uint64(oid), 10)
	go func() {
		defer close(m.done)
		from := lsn
		step := func() {
			var n int64
			if m.err == nil {
				m.err = b.pool.QueryRow(ctx, dbWALStepSQL, from, db).Scan(&n, &from)
				m.total += n
			}
		}
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				step()
				return
			case <-ctx.Done():
				m.err = ctx.Err()
				return
			case <-t.C:
				step()
			}
		}
	}()
	return m
}

// halt stops the meter (after a last read) and waits for it; a phase that
// failed halts it by defer.
func (m *walMeter) halt() {
	if m == nil {
		return
	}
	m.once.Do(func() { close(m.stop) })
	<-m.done
}

// end reads to the flushed end and returns the total, -1 when the meter
// could not read (said once).
func (m *walMeter) end(b *bench) int64 {
	if m == nil {
		return -1
	}
	m.halt()
	if m.err != nil {
		b.step("storage: per-database WAL not read: %v", m.err)
		return -1
	}
	return m.total
}
