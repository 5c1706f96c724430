package main

// Storage parts "traffic" and "purge": bytes on disk and WAL per event on
// the same deliveries through each layout, and each layout's retention pass
// on what they left, or on rows filled by SQL.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// trafficResult is one layout after the same deliveries.
type trafficResult struct {
	Side       string  `json:"side"`
	Sent       int64   `json:"sent"`
	Accepted   int64   `json:"accepted"`
	IntakeRate float64 `json:"intake_accepted_per_s"`
	HTTPErrors string  `json:"http_errors"`
	Pending    int64   `json:"pending_after_drain"`
	Retained   int64   `json:"inbox_rows"`
	Before     sizes   `json:"sizes_empty"`
	After      sizes   `json:"sizes_after_processing"`
	IntakeWAL  int64   `json:"intake_wal_bytes"`
	ProcessWAL int64   `json:"processing_wal_bytes"`
	// IntakeWALDB and ProcessWALDB are the layout's database's share of
	// them (pg_walinspect); -1 when it could not be read.
	IntakeWALDB  int64       `json:"intake_wal_db_bytes"`
	ProcessWALDB int64       `json:"processing_wal_db_bytes"`
	ProcessSec   float64     `json:"processing_s"`
	Retention    *passResult `json:"retention,omitempty"`
	RetentionErr string      `json:"retention_error,omitempty"`

	dbURL, dbName, cfgPath string
	newest                 time.Time
}

// passResult is one retention pass: its time, its WAL and what it left.
type passResult struct {
	Seconds  float64 `json:"seconds"`
	WAL      int64   `json:"wal_bytes"`
	WALDB    int64   `json:"wal_db_bytes"` // -1: not read
	Before   sizes   `json:"sizes_before"`
	After    sizes   `json:"sizes_after"`
	Dead     int64   `json:"dead_tuples_after"`
	Retained int64   `json:"inbox_rows_after"`
}

func (b *bench) storageTraffic(ctx context.Context, sides []*storageSide) error {
	horizon, interval := b.opts.soakHorizon, b.opts.soakInterval
	var results []*trafficResult
	defer func() { b.printTraffic(sides, results) }()
	var newest time.Time
	for _, s := range sides {
		r, err := b.trafficSide(ctx, s, horizon, interval)
		if err != nil {
			return fmt.Errorf("%s: %w", s.label, err)
		}
		results = append(results, r)
		newest = r.newest
	}
	if err := b.waitPast(ctx, newest.Add(horizonWait(horizon, interval)), "until the traffic is behind the retention horizon"); err != nil {
		return err
	}
	for i, s := range sides {
		r := results[i]
		pool, err := b.openSide(ctx, r.dbURL)
		if err != nil {
			return err
		}
		b.step("storage traffic, %s: retention pass", s.label)
		r.Retention, err = b.measurePass(ctx, s, pool, r.cfgPath, r.dbURL, r.dbName, horizon)
		pool.Close()
		if err != nil {
			r.RetentionErr = err.Error()
		}
	}
	return nil
}

func (b *bench) trafficSide(ctx context.Context, s *storageSide, horizon, interval time.Duration) (*trafficResult, error) {
	r := &trafficResult{Side: s.key}
	dbURL, cfgPath, auth, err := b.prepareSide(ctx, s, partTraffic, horizon, interval, false)
	if err != nil {
		return nil, err
	}
	r.dbURL, r.cfgPath = dbURL, cfgPath
	if _, r.dbName, err = storageDBURL(b.opts.dbURL, s.key); err != nil {
		return nil, err
	}
	pool, err := b.openSide(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if r.Before, err = readSizes(ctx, pool); err != nil {
		return nil, err
	}

	// Intake alone: the receiver writes inbox and outbox rows, nothing
	// reads them yet.
	lsn, err := walLSN(ctx, pool)
	if err != nil {
		return nil, err
	}
	meter := b.startWALMeter(ctx, r.dbName, lsn)
	defer func() { meter.halt() }()
	rp, err := startReceiver(ctx, s.bin, cfgPath, dbURL, b.opts.receiverLog, b.progress)
	if err != nil {
		return nil, err
	}
	rate := b.opts.storageIntakeRate
	d := time.Duration(float64(b.opts.storageEvents) / rate * float64(time.Second))
	b.step("storage traffic, %s: %s deliveries to the receiver alone at %s/s", s.label, fmtInt(int64(b.opts.storageEvents)), fmtRate(rate))
	cl := loadClient(b.opts.pipeWorkers)
	stub := &pipeline{b: b, auth: auth}
	st := openLoop(ctx, cl, "http://"+rp.addr+"/webhooks/"+pipeEndpoint, stub.delivery("t_"), rate, d, b.opts.pipeWorkers)
	cl.CloseIdleConnections()
	rp.stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.Sent, r.Accepted, r.HTTPErrors = st.sent, st.accepted, st.errorSummary()
	r.IntakeRate = float64(st.accepted) / max(st.elapsed.Seconds(), d.Seconds())
	if r.IntakeWAL, err = walSince(ctx, pool, lsn); err != nil {
		return nil, err
	}
	r.IntakeWALDB = meter.end(b)
	if st.accepted == 0 {
		return nil, fmt.Errorf("the receiver accepted nothing: %s", st.errorSummary())
	}
	r.newest = time.Now()

	// Processing: `hookyard dev` relays the outbox and processes every
	// event; its start (fences, group join) counts here too.
	if lsn, err = walLSN(ctx, pool); err != nil {
		return nil, err
	}
	meter = b.startWALMeter(ctx, r.dbName, lsn)
	start := time.Now()
	p, err := b.startDev(ctx, devSpec{bin: s.bin, dbURL: dbURL, statistics: true, cfgPath: cfgPath, auth: auth})
	if err != nil {
		return nil, err
	}
	b.step("storage traffic, %s: `hookyard dev` processing the backlog", s.label)
	r.Pending, err = waitNonePending(ctx, pool, b.opts.storageDrain)
	r.ProcessSec = time.Since(start).Seconds()
	p.close()
	if err != nil {
		return nil, err
	}
	if r.ProcessWAL, err = walSince(ctx, pool, lsn); err != nil {
		return nil, err
	}
	r.ProcessWALDB = meter.end(b)
	if r.After, err = readSizes(ctx, pool); err != nil {
		return nil, err
	}
	if r.Retained, err = countInbox(ctx, pool); err != nil {
		return nil, err
	}
	b.step("storage traffic, %s: %s accepted, %s retained, %s on disk, WAL intake %s, processing %s", s.label,
		fmtInt(r.Accepted), fmtInt(r.Retained), fmtBytes(r.After.Total), fmtBytes(r.IntakeWAL), fmtBytes(r.ProcessWAL))
	return r, nil
}

// waitNonePending waits until no inbox row is pending, or limit passed, and
// returns how many still are.
func waitNonePending(ctx context.Context, pool *pgxpool.Pool, limit time.Duration) (int64, error) {
	deadline := time.Now().Add(limit)
	for {
		var n int64
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending'`).Scan(&n); err != nil {
			return 0, fmt.Errorf("count pending: %w", err)
		}
		if n == 0 || time.Now().After(deadline) {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// measurePass runs one retention pass of side s after a CHECKPOINT (so that
// both layouts' passes start with the same full-page-write state) and
// measures its time, WAL and what it left.
func (b *bench) measurePass(ctx context.Context, s *storageSide, pool *pgxpool.Pool, cfgPath, dbURL, dbName string, horizon time.Duration) (*passResult, error) {
	r := &passResult{}
	var err error
	if r.Before, err = readSizes(ctx, pool); err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	lsn, err := walLSN(ctx, pool)
	if err != nil {
		return nil, err
	}
	meter := b.startWALMeter(ctx, dbName, lsn)
	defer meter.halt()
	start := time.Now()
	if err := retentionPass(ctx, s, cfgPath, dbURL, horizon); err != nil {
		return nil, err
	}
	r.Seconds = time.Since(start).Seconds()
	if r.WAL, err = walSince(ctx, pool, lsn); err != nil {
		return nil, err
	}
	r.WALDB = meter.end(b)
	if r.After, err = readSizes(ctx, pool); err != nil {
		return nil, err
	}
	if r.Retained, err = countInbox(ctx, pool); err != nil {
		return nil, err
	}
	// The pass's backends report their dead tuples when they end; a second
	// covers the statistics' flush.
	time.Sleep(time.Second)
	if r.Dead, err = deadTuples(ctx, pool); err != nil {
		return nil, err
	}
	return r, nil
}

// purgeResult is one layout's retention pass over rows filled by SQL.
type purgeResult struct {
	Side    string      `json:"side"`
	Rows    int         `json:"rows"`
	Tables  []string    `json:"filled_tables"`
	FillSec float64     `json:"fill_s"`
	Pass    *passResult `json:"pass,omitempty"`
	Err     string      `json:"error,omitempty"`

	dbURL, dbName, cfgPath string
	filled                 time.Time
}

// storagePurge fills -storage-purge-rows processed events into each layout
// with SQL, waits until they are all behind the horizon, and times each
// layout's retention pass over them.
func (b *bench) storagePurge(ctx context.Context, sides []*storageSide) error {
	horizon, interval := b.opts.soakHorizon, b.opts.soakInterval
	var results []*purgeResult
	defer func() { b.printPurge(sides, results) }()
	var newest time.Time
	for _, s := range sides {
		r := &purgeResult{Side: s.key, Rows: b.opts.storagePurgeRows}
		dbURL, cfgPath, _, err := b.prepareSide(ctx, s, partPurge, horizon, interval, false)
		if err != nil {
			return fmt.Errorf("%s: %w", s.label, err)
		}
		r.dbURL, r.cfgPath = dbURL, cfgPath
		if _, r.dbName, err = storageDBURL(b.opts.dbURL, s.key); err != nil {
			return err
		}
		pool, err := b.openSide(ctx, dbURL)
		if err != nil {
			return err
		}
		start := time.Now()
		last := time.Now()
		r.Tables, err = b.fill(ctx, pool, r.Rows, 250_000, func(done int) {
			if time.Since(last) > 10*time.Second || done == r.Rows {
				b.step("storage purge, %s: %s of %s rows filled", s.label, fmtInt(int64(done)), fmtInt(int64(r.Rows)))
				last = time.Now()
			}
		})
		if err == nil {
			r.FillSec = time.Since(start).Seconds()
			// As autovacuum would have by the time a horizon passes: hint
			// bits set, visibility map, statistics.
			b.step("storage purge, %s: VACUUM ANALYZE", s.label)
			_, err = pool.Exec(ctx, `VACUUM ANALYZE`)
		}
		pool.Close()
		results = append(results, r)
		if err != nil {
			r.Err = err.Error()
			continue
		}
		r.filled = time.Now()
		newest = r.filled
	}
	if err := b.waitPast(ctx, newest.Add(horizonWait(horizon, interval)), "until the filled rows are behind the retention horizon"); err != nil {
		return err
	}
	for i, s := range sides {
		r := results[i]
		if r.Err != "" {
			continue
		}
		pool, err := b.openSide(ctx, r.dbURL)
		if err != nil {
			return err
		}
		b.step("storage purge, %s: retention pass over %s rows", s.label, fmtInt(int64(r.Rows)))
		r.Pass, err = b.measurePass(ctx, s, pool, r.cfgPath, r.dbURL, r.dbName, horizon)
		pool.Close()
		if err != nil {
			r.Err = err.Error()
		}
	}
	// Tens of GB at full size: give the disk back.
	for _, s := range sides {
		if _, name, err := storageDBURL(b.opts.dbURL, s.key); err == nil {
			_, _ = b.pool.Exec(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`)
		}
	}
	return nil
}

func fmtBytes(n int64) string {
	f := float64(n)
	switch {
	case n < 0:
		return "-" + fmtBytes(-n)
	case f >= 1<<30:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	case f >= 1<<20:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	case f >= 1<<10:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	default:
		return fmt.Sprintf("%d B", n)
	}
}

func perEvent(n, events int64) string {
	if events <= 0 {
		return "n/a"
	}
	return fmtInt(int64(float64(n)/float64(events)+0.5)) + " B"
}

// sideHeader is the table header: a first column, then per side the given
// columns, each headed "<side label> <column>".
func sideHeader(first string, sides []*storageSide, cols ...string) []string {
	h := []string{first}
	for _, s := range sides {
		for _, c := range cols {
			h = append(h, s.label+" "+c)
		}
	}
	return h
}

func (b *bench) printTraffic(sides []*storageSide, results []*trafficResult) {
	if len(results) == 0 {
		return
	}
	t := newTable(fmt.Sprintf("S1. Bytes on disk per retained event, after %s Chargebee deliveries through each layout (receiver alone, then `hookyard dev`)",
		fmtInt(int64(b.opts.storageEvents))), sideHeader("table group", sides[:len(results)], "bytes", "per event")...)
	groups := map[string]int64{}
	for _, r := range results {
		for g, n := range r.After.Groups {
			groups[g] = max(groups[g], n-r.Before.Groups[g])
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	slices.SortFunc(names, func(a, c string) int { return int(groups[c] - groups[a]) })
	var otherNames []string
	for _, g := range names {
		if groups[g] < 64<<10 {
			otherNames = append(otherNames, g)
			continue
		}
		cells := []string{g}
		for _, r := range results {
			n := r.After.Groups[g] - r.Before.Groups[g]
			if _, ok := r.After.Groups[g]; !ok {
				cells = append(cells, "—", "—")
				continue
			}
			cells = append(cells, fmtBytes(n), perEvent(n, r.Retained))
		}
		t.add(cells...)
	}
	if len(otherNames) > 0 {
		cells := []string{"other tables (< 64 KiB each)"}
		for _, r := range results {
			var n int64
			for _, g := range otherNames {
				n += r.After.Groups[g] - r.Before.Groups[g]
			}
			cells = append(cells, fmtBytes(n), perEvent(n, r.Retained))
		}
		t.add(cells...)
	}
	row := func(name string, f func(r *trafficResult) (string, string)) {
		cells := []string{name}
		for _, r := range results {
			a, c := f(r)
			cells = append(cells, a, c)
		}
		t.add(cells...)
	}
	row("**total** (pg_total_relation_size, every table and partition)", func(r *trafficResult) (string, string) {
		n := r.After.Total - r.Before.Total
		return fmtBytes(n), perEvent(n, r.Retained)
	})
	row("pg_database_size growth", func(r *trafficResult) (string, string) {
		n := r.After.Database - r.Before.Database
		return fmtBytes(n), perEvent(n, r.Retained)
	})
	row("events accepted / inbox rows", func(r *trafficResult) (string, string) {
		return fmtInt(r.Accepted), fmtInt(r.Retained)
	})
	t.note("Growth from the freshly migrated schema. Groups are tables with their partitions, indexes and TOAST. Sizes right after the backlog is processed, nothing vacuumed or purged yet.")
	b.addSideNotes(t, sides)
	t.data = map[string]any{"results": results}
	b.emit(t)

	w := newTable("S2. WAL bytes per event: intake, processing, retention (whole server / the layout's database)", sideHeader("phase", sides[:len(results)], "server WAL (per event)", "its database's WAL (per event)")...)
	w.add(append([]string{"intake (receiver alone)"}, pairs(results, func(r *trafficResult) (int64, int64, int64) { return r.IntakeWAL, r.IntakeWALDB, r.Accepted })...)...)
	w.add(append([]string{"processing (`hookyard dev`: relay, processor, its start)"}, pairs(results, func(r *trafficResult) (int64, int64, int64) {
		return r.ProcessWAL, r.ProcessWALDB, r.Accepted
	})...)...)
	w.add(append([]string{"retention pass once every event is behind the horizon"}, pairs(results, func(r *trafficResult) (int64, int64, int64) {
		if r.Retention == nil {
			return -1, -1, 0
		}
		return r.Retention.WAL, r.Retention.WALDB, r.Accepted
	})...)...)
	ret := []string{"retention pass: time, size after / dead tuples after"}
	for _, r := range results {
		if r.Retention == nil {
			ret = append(ret, "failed: "+r.RetentionErr, "")
			continue
		}
		ret = append(ret, fmt.Sprintf("%s, %s on disk", fmtDur(secs(r.Retention.Seconds)), fmtBytes(r.Retention.After.Total)),
			fmtInt(r.Retention.Dead)+" dead tuples")
	}
	w.add(ret...)
	intake := []string{"intake accepted / HTTP errors"}
	for _, r := range results {
		intake = append(intake, fmtRate(r.IntakeRate)+"/s", "errors: "+r.HTTPErrors)
	}
	w.add(intake...)
	w.note("Server WAL is pg_current_wal_insert_lsn() before and after each phase: anything else writing to this Postgres counts too. The database's WAL is the share of it whose records touch the layout's database's relations, full-page images included, commit records not (pg_walinspect's pg_get_wal_records_info from the bench database, read every 2 s during the phase; n/a without the extension). Intake is `hookyard receiver` alone taking %s deliveries at %s/s open loop (nothing consumes the outbox yet); processing is `hookyard dev` started afterwards on the same database until no event is pending (its relay publishes the backlog to kfake, its processor writes projections and history); retention is one pass (today: `hookyard purge -older-than %s`; new: the binary's retention command) after a CHECKPOINT, once the newest event is a horizon and a partition interval old (horizon %s, interval %s).",
		fmtInt(int64(b.opts.storageEvents)), fmtRate(b.opts.storageIntakeRate), b.opts.soakHorizon, b.opts.soakHorizon, b.opts.soakInterval)
	b.emit(w)
}

// pairs are, per result, the server's and the database's WAL of a phase
// with their bytes per event; -1 is a WAL that could not be read.
func pairs(results []*trafficResult, f func(*trafficResult) (server, own, events int64)) []string {
	var c []string
	cell := func(n, ev int64) string {
		if n < 0 {
			return "n/a"
		}
		return fmtBytes(n) + " (" + perEvent(n, ev) + ")"
	}
	for _, r := range results {
		n, own, ev := f(r)
		c = append(c, cell(n, ev), cell(own, ev))
	}
	return c
}

func (b *bench) addSideNotes(t *table, sides []*storageSide) {
	for _, s := range sides {
		for _, n := range s.notes {
			t.note("%s", n)
		}
	}
}

func (b *bench) printPurge(sides []*storageSide, results []*purgeResult) {
	if len(results) == 0 {
		return
	}
	t := newTable(fmt.Sprintf("S3. Retention pass at %s inbox rows (filled by SQL, ~250 B bodies): time and WAL", fmtInt(int64(b.opts.storagePurgeRows))),
		append([]string{"measure"}, func() []string {
			var h []string
			for _, s := range sides[:len(results)] {
				h = append(h, s.label)
			}
			return h
		}()...)...)
	row := func(name string, f func(r *purgeResult) string) {
		cells := []string{name}
		for _, r := range results {
			switch {
			case r.Pass != nil:
				cells = append(cells, f(r))
			case r.Err != "":
				cells = append(cells, "failed: "+r.Err)
			default:
				cells = append(cells, "—")
			}
		}
		t.add(cells...)
	}
	row("tables filled", func(r *purgeResult) string { return strings.Join(r.Tables, ", ") })
	row("fill time", func(r *purgeResult) string { return fmtDur(secs(r.FillSec)) })
	row("on disk before the pass (total / database)", func(r *purgeResult) string {
		return fmtBytes(r.Pass.Before.Total) + " / " + fmtBytes(r.Pass.Before.Database)
	})
	row("**pass time**", func(r *purgeResult) string { return fmtDur(secs(r.Pass.Seconds)) })
	row("**pass WAL**, whole server (per row)", func(r *purgeResult) string {
		return fmtBytes(r.Pass.WAL) + " (" + perEvent(r.Pass.WAL, int64(r.Rows)) + ")"
	})
	row("pass WAL, the layout's database (per row)", func(r *purgeResult) string {
		if r.Pass.WALDB < 0 {
			return "n/a"
		}
		return fmtBytes(r.Pass.WALDB) + " (" + perEvent(r.Pass.WALDB, int64(r.Rows)) + ")"
	})
	row("on disk after the pass (total / database)", func(r *purgeResult) string {
		return fmtBytes(r.Pass.After.Total) + " / " + fmtBytes(r.Pass.After.Database)
	})
	row("dead tuples after the pass", func(r *purgeResult) string { return fmtInt(r.Pass.Dead) })
	row("inbox rows after the pass", func(r *purgeResult) string { return fmtInt(r.Pass.Retained) })
	t.note("Each layout migrated by its own binary, then filled with processed Chargebee events by INSERT … SELECT generate_series (%s rows per statement, received_at = clock_timestamp(), columns chosen from the catalogue: webhook_inbox and, where they exist, %s; in the new layout the ledger row's body_at is its body's stored_at, the statement's time, in a partition of the interval created before it, the legacy body columns empty), VACUUM ANALYZE; once every row is a horizon (%s) and a partition interval (%s) old, a CHECKPOINT, then one retention pass timed as a subprocess. Today's pass is `hookyard purge -older-than %s` (payloads dropped chunk by chunk, identities kept). WAL: the whole server's (pg_current_wal_insert_lsn()) and the records touching the layout's database (pg_walinspect, read every 2 s during the pass; n/a without the extension).",
		fmtInt(250_000), b.opts.storageBodyTables, b.opts.soakHorizon, b.opts.soakInterval, b.opts.soakHorizon)
	b.addSideNotes(t, sides)
	t.data = map[string]any{"results": results}
	b.emit(t)
}
