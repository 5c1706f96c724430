// Package projection owns projection and projection_history:
// the current state of each resource and the record of why it is so, and
// every statement over them — the processor's writes and its parking of
// resources whose hint died (queued into its batch transaction), the
// reconciler's choice of what to check, and the reads of the query API and
// explain.
//
// A projection only moves forward. Versioned writes compare versions inside
// the write itself (never read-then-write); deletions leave a tombstone with
// their version. Callers run these writes in a transaction that also checked
// the writer's fencing generation.
//
// Some statements here also write other tables: the reconciler's (stale,
// parked, listed) insert their checks into outbox and their divergences into
// reconcile_divergence (the listed one also the listings' states into
// reconcile_listed, which this package owns: LoadListed, QueueDeleteListed),
// in the same statement that picks the projections. A
// multi-table statement lives with the table whose rows it decides on, and
// stays one statement so that the decision and its writes cannot part.
// reconcile_divergence is read here too (Divergences). This package must
// never call a provider, and never write a projection without the write
// deciding, by version or observation time, that it moves forward — but for
// an erasure request (Erase), which empties a state and keeps the version,
// status and fetch order that ordering needs. A state keeps only
// DecisionFields and the configured ones (KeptFields).
package projection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/partition"
)

// Outcomes of a write, recorded in projection_history and on the inbox row.
const (
	Applied   = "applied"
	Duplicate = "duplicate" // same version, same content
	Stale     = "stale"     // lower version than the projection's
	Conflict  = "conflict"  // same version, different content
	Gap       = "gap"       // incremental endpoint skipped a version: parked
	Fetched   = "fetched"   // state fetched from the provider and written
	Recorded  = "recorded"  // no projection change (fact, ignored type)
	// FetchFailed: the provider fetch failed (error, timeout, 5xx, 429,
	// breaker open); nothing was written and the event is retried.
	FetchFailed = "fetch_failed"
	// FetchNotFound: the provider answered "no such resource". Never a state:
	// nothing was written and the event is retried, then dead.
	FetchNotFound = "fetch_not_found"
	// Fenced: the writer lost its partition; its transaction was refused and
	// the partition's new owner handles the event.
	Fenced = "fenced"
	// Unordered: a versioned snapshot met a projection fetched from the
	// provider's API (no version). The two cannot be ordered, so the fetched
	// state stays and the projection is parked for a check, which fetches
	// the current state again.
	Unordered = "unordered"
)

// Findings of a reconciliation check: what the provider's state was, compared
// with the projection the check found.
const (
	InSync   = "in_sync"  // the provider has what the projection had
	Diverged = "diverged" // the projection differed from the provider
	Missing  = "missing"  // there was no projection at all
)

// Label names a projection's state in one word, as previous_status records
// it: "deleted" for a tombstone, "unknown" for a projection without status,
// else its status. "" stands for no projection.
func Label(status string, deleted bool) string {
	switch {
	case deleted:
		return "deleted"
	case status == "":
		return "unknown"
	}
	return status
}

// labelSQL is Label over the projection's columns.
const labelSQL = `CASE WHEN deleted THEN 'deleted' ELSE coalesce(nullif(status, ''), 'unknown') END`

// Finding compares the state a write found (previous, a Label or "" for
// none) with the state the provider reported.
func Finding(previous, status string, deleted bool) string {
	switch {
	case previous == "":
		return Missing
	case previous == Label(status, deleted):
		return InSync
	}
	return Diverged
}

// ErrNotFound: no projection for that resource.
var ErrNotFound = errors.New("projection not found")

// Write is one projection write.
type Write struct {
	Resource message.Resource
	// Version is nil for fetched state.
	Version *int64
	State   []byte
	Status  string
	Deleted bool
	EventID string
	// Generation is the fencing generation the writer holds.
	Generation int64
	// Incremental demands Version == current+1.
	Incremental bool
	// Changes collects the write's change record when the write changed
	// the projection (see changeHead). nil: no record.
	Changes *Changes
}

// versionedSQL decides and writes in one statement, and returns its
// decision. The rules, in order, against the projection the statement finds:
//
//   - none: insert (applied).
//   - fetched (provider_version NULL): never overwritten (unordered). A
//     fetched state has no version to compare with, and a late snapshot
//     replacing a fresh fetch would move the resource backwards; the
//     projection is parked so a check fetches the provider's state again.
//   - incremental endpoint, version past current+1: not applied, parked (gap).
//   - higher version: applied; lower: stale.
//   - equal version, same deleted flag and same content: duplicate. Content
//     is the state compared as jsonb, which is normalized (key order,
//     spacing), so a re-serialized copy is still a duplicate.
//   - equal version, a deletion over a live snapshot: applied. A provider's
//     deletion event repeats the last version (Chargebee's resource_version
//     is unchanged by subscription_deleted), and the deletion is the later
//     fact; the live snapshot of that version arriving after it is stale.
//   - equal version, same deleted flag, other content: conflict. The first
//     to arrive stays; the projection is parked with the reason.
//
// The comparison that protects the projection is inside the upsert's
// ON CONFLICT ... WHERE, against the row as it is when written; old and the
// verdict only classify (and read the state as of the statement's start).
// Parking a projection that is already parked only updates the reason: it
// keeps parked_at and the time of the check the reconciler sent, so a
// parked resource is checked and counted once per parking, however many
// conflicting or unordered copies (replays) arrive while it waits.
const versionedSQL = `
WITH old AS (
    SELECT provider_version, state, status, deleted FROM projection
    WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5
), verdict AS (
    SELECT CASE
        WHEN o.provider_version IS NULL THEN 'unordered'
        WHEN $12::bool AND o.provider_version + 1 < $6 THEN 'gap'
        WHEN $6 > o.provider_version THEN 'newer'
        WHEN $6 < o.provider_version THEN 'stale'
        WHEN o.deleted = $9 AND o.state = $7::jsonb THEN 'duplicate'
        WHEN $9 AND NOT o.deleted THEN 'newer'
        WHEN o.deleted THEN 'stale'
        ELSE 'conflict' END AS v
    FROM old o
), up AS (
    INSERT INTO projection AS p (provider, source_account, environment, resource_type, resource_id,
        provider_version, state, status, deleted, source_event_id, fence_generation, observed_at, updated_at, needs_reconcile)
    SELECT $1, $2, $3, $4, $5, $6, $7::jsonb, $8, $9, $10, $11, now(), now(), false
    WHERE NOT EXISTS (SELECT 1 FROM verdict WHERE v IN ('unordered', 'gap'))
    ON CONFLICT (provider, source_account, environment, resource_type, resource_id) DO UPDATE
    SET provider_version = EXCLUDED.provider_version, state = EXCLUDED.state, status = EXCLUDED.status,
        deleted = EXCLUDED.deleted, source_event_id = EXCLUDED.source_event_id,
        fence_generation = EXCLUDED.fence_generation, observed_at = now(), updated_at = now(),
        needs_reconcile = false, needs_reconcile_reason = NULL, parked_at = NULL, reconcile_checked_at = NULL
    WHERE p.provider_version IS NOT NULL
      AND (EXCLUDED.provider_version > p.provider_version
           OR (EXCLUDED.provider_version = p.provider_version AND EXCLUDED.deleted AND NOT p.deleted))
    ` + changeReturning + `
), park AS (
    UPDATE projection p SET needs_reconcile = true, updated_at = now(),
        parked_at = CASE WHEN p.needs_reconcile THEN coalesce(p.parked_at, now()) ELSE now() END,
        reconcile_checked_at = CASE WHEN p.needs_reconcile THEN p.reconcile_checked_at END,
        needs_reconcile_reason = CASE x.v
            WHEN 'unordered' THEN 'unordered: versioned snapshot v' || $6 || ' met state fetched from the provider (no version); fetched state kept'
            WHEN 'gap' THEN 'version gap: v' || $6 || ' does not follow v' || p.provider_version
            ELSE 'version conflict: another snapshot of v' || $6 || ' (event ' || $10 || ') differs; first one kept' END
    FROM verdict x
    WHERE p.provider = $1 AND p.source_account = $2 AND p.environment = $3 AND p.resource_type = $4 AND p.resource_id = $5
      AND x.v IN ('unordered', 'gap', 'conflict')
    RETURNING 1
)
SELECT CASE
    WHEN EXISTS (SELECT 1 FROM up) THEN 'applied'
    ELSE coalesce((SELECT CASE WHEN v = 'newer' THEN 'stale' ELSE v END FROM verdict), 'stale') END,
    coalesce((SELECT ` + labelSQL + ` FROM old), ''),
    ` + versionedChange

// Result is what a write did and what it found.
type Result struct {
	// Outcome is Applied, Stale, Duplicate, Conflict, Gap or Unordered.
	Outcome string
	// Previous is the Label of the projection the write found, "" for none.
	Previous string
}

// ApplyVersioned writes w only if its version is greater than the
// projection's, in one statement, and says what happened.
func ApplyVersioned(ctx context.Context, tx pgx.Tx, w Write) (string, error) {
	b := &pgx.Batch{}
	var res Result
	QueueVersioned(b, w, &res)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return "", err
	}
	if err := w.Changes.Insert(ctx, tx); err != nil {
		return "", err
	}
	return res.Outcome, nil
}

// QueueVersioned queues the versioned write on b; res is set when the
// batch's results are read.
func QueueVersioned(b *pgx.Batch, w Write, res *Result) {
	r := w.Resource
	var v int64
	if w.Version != nil {
		v = *w.Version
	}
	args := []any{r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID,
		v, string(w.State), w.Status, w.Deleted, w.EventID, w.Generation, w.Incremental}
	sql := versionedPlainSQL
	if w.Changes != nil {
		sql = versionedSQL
	}
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		if w.Version == nil {
			return fmt.Errorf("apply versioned projection %s: no version", r.Key())
		}
		var change *string
		if err := row.Scan(&res.Outcome, &res.Previous, &change); err != nil {
			return fmt.Errorf("apply versioned projection %s: %w", r.Key(), err)
		}
		w.Changes.add(r, change)
		return nil
	})
}

// fetchedSQL writes fetched state unless the projection holds an
// observation whose fetch started later, and returns 'fetched' or 'stale'
// with the Label of what it found ("" for nothing). Fetch starts are
// ordered by their number from projection_fetch_seq (fetch_seq), never by
// a clock: after a failover to a primary whose clock is behind, a fresh
// fetch reads an earlier fetched_at than the one stored, and a clock
// compare would refuse it. A row written before fetch_seq existed keeps the
// fetched_at compare until its next fetched write. Partition order and the
// fence keep one writer per resource in normal operation; this compare
// holds when they do not (a key that moved to a new partition while its
// backlog sat on the old one). The old CTE locks the row first, so it reads
// the row as it is when written, not as the statement's snapshot had it: a
// change record is left out only when the stored state really was the one
// fetched (compared with a write that committed meanwhile, the last record
// of the key would be the older state). The insert runs whether or not the
// outer query reads it.
const fetchedSQL = `
WITH old AS MATERIALIZED (
    SELECT status, deleted, state FROM projection
    WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5
    FOR UPDATE
), up AS (
    INSERT INTO projection AS p (provider, source_account, environment, resource_type, resource_id,
        provider_version, state, status, deleted, source_event_id, fence_generation, observed_at, updated_at, fetched_at, fetch_seq)
    -- reads old (and so locks the row) before the upsert: scanned later, a
    -- row this statement already updated is skipped by FOR UPDATE
    SELECT $1, $2, $3, $4, $5, NULL, $6::jsonb, $7, $8, $9, $10, $11::timestamptz, now(), $11::timestamptz, $12::bigint
    FROM (SELECT count(*) FROM old) locked
    ON CONFLICT (provider, source_account, environment, resource_type, resource_id) DO UPDATE
    SET state = EXCLUDED.state, status = EXCLUDED.status, deleted = EXCLUDED.deleted,
        source_event_id = EXCLUDED.source_event_id, fence_generation = EXCLUDED.fence_generation,
        observed_at = EXCLUDED.observed_at, updated_at = now(), needs_reconcile = false,
        needs_reconcile_reason = NULL, parked_at = NULL, reconcile_checked_at = NULL,
        fetched_at = EXCLUDED.fetched_at, fetch_seq = EXCLUDED.fetch_seq
    WHERE CASE WHEN p.fetch_seq IS NOT NULL THEN EXCLUDED.fetch_seq >= p.fetch_seq
               ELSE p.fetched_at IS NULL OR EXCLUDED.fetched_at >= p.fetched_at END
    ` + changeReturning + `
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM up) THEN 'fetched' ELSE 'stale' END,
       coalesce((SELECT ` + labelSQL + ` FROM old), ''),
       ` + fetchedChange

// versionedChange and fetchedChange are the change columns of versionedSQL
// and fetchedSQL; a fetch that found what was stored changes nothing
// downstream.
const (
	versionedChange = changeHead + Applied + changeTail + `)`
	fetchedChange   = changeHead + Fetched + changeTail + `
    WHERE NOT EXISTS (SELECT 1 FROM old o WHERE o.state = u.state AND o.status IS NOT DISTINCT FROM u.status
                      AND o.deleted = u.deleted))`
)

// versionedPlainSQL and fetchedPlainSQL are the statements without their
// change column (NULL in its place), for a processor whose change stream
// is off: no record is built.
var (
	versionedPlainSQL = withoutChange(versionedSQL, versionedChange)
	fetchedPlainSQL   = withoutChange(fetchedSQL, fetchedChange)
)

func withoutChange(sql, change string) string {
	out := strings.Replace(sql, change, "NULL::text", 1)
	if out == sql {
		panic("projection: statement without its change column")
	}
	return out
}

// FetchStart is when a fetch started, read from the database before the
// provider call: Seq orders fetched writes, At is the wall clock kept for
// people (fetched_at).
type FetchStart struct {
	At  time.Time
	Seq int64
}

// startFetchSQL numbers a fetch start. nextval is never rolled back and
// never repeats, whatever the clocks of the primaries it ran on.
const startFetchSQL = `SELECT clock_timestamp(), nextval('projection_fetch_seq')`

// StartFetch reads a FetchStart. Call it with no transaction open, right
// before the provider call, so no observation it orders was made before it.
func StartFetch(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (FetchStart, error) {
	var fs FetchStart
	if err := q.QueryRow(ctx, startFetchSQL).Scan(&fs.At, &fs.Seq); err != nil {
		return fs, fmt.Errorf("number a fetch start: %w", err)
	}
	return fs, nil
}

// QueueFetched queues a write of state fetched from the provider whose
// fetch started at start. previous is set to the Label of the projection
// it found ("" for none) when the batch's results are read;
// QueueFetchedResult also says whether it wrote.
func QueueFetched(b *pgx.Batch, w Write, start FetchStart, previous *string) {
	queueFetched(b, w, start, func(_, prev string) { *previous = prev })
}

// QueueFetchedResult is QueueFetched that sets res.Outcome to Fetched, or
// Stale when the projection holds an observation fetched later.
func QueueFetchedResult(b *pgx.Batch, w Write, start FetchStart, res *Result) {
	queueFetched(b, w, start, func(outcome, prev string) { res.Outcome, res.Previous = outcome, prev })
}

func queueFetched(b *pgx.Batch, w Write, start FetchStart, set func(outcome, previous string)) {
	r := w.Resource
	args := []any{r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID,
		string(w.State), w.Status, w.Deleted, w.EventID, w.Generation, start.At, start.Seq}
	sql := fetchedPlainSQL
	if w.Changes != nil {
		sql = fetchedSQL
	}
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		var outcome, prev string
		var change *string
		if err := row.Scan(&outcome, &prev, &change); err != nil {
			return fmt.Errorf("write fetched projection %s: %w", r.Key(), err)
		}
		set(outcome, prev)
		w.Changes.add(r, change)
		return nil
	})
}

// HistoryEntry is one line of why a resource is in its state.
type HistoryEntry struct {
	// ID orders entries recorded in one transaction (same RecordedAt).
	ID       int64            `json:"id,omitempty"`
	Resource message.Resource `json:"-"`
	// EventID is empty for a reconciliation check.
	EventID string `json:"event_id,omitempty"`
	Outcome string `json:"outcome"`
	Version *int64 `json:"provider_version,omitempty"`
	// Status and Deleted are the state the entry is about (written, or
	// refused as stale).
	Status  string `json:"status,omitempty"`
	Deleted bool   `json:"deleted,omitempty"`
	// Previous is the Label of the projection the write found ("" for
	// none); nil when no write was attempted.
	Previous   *string   `json:"previous_status,omitempty"`
	Generation int64     `json:"fence_generation"`
	Detail     string    `json:"detail,omitempty"`
	RecordedAt time.Time `json:"recorded_at"`
}

const historySQL = `
INSERT INTO projection_history (provider, source_account, environment, resource_type, resource_id,
    event_id, outcome, provider_version, status, fence_generation, detail, previous_status, deleted)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                     $8::int8[], $9::text[], $10::int8[], $11::text[], $12::text[], $13::bool[])`

// QueueHistory queues one statement that appends entries.
func QueueHistory(b *pgx.Batch, entries []HistoryEntry) {
	if len(entries) == 0 {
		return
	}
	n := len(entries)
	cols := make([][]string, 9)
	for i := range cols {
		cols[i] = make([]string, 0, n)
	}
	versions := make([]*int64, 0, n)
	gens := make([]int64, 0, n)
	prev := make([]*string, 0, n)
	deleted := make([]bool, 0, n)
	for _, e := range entries {
		r := e.Resource
		for i, v := range []string{r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, e.EventID, e.Outcome, e.Status, e.Detail} {
			cols[i] = append(cols[i], v)
		}
		versions = append(versions, e.Version)
		gens = append(gens, e.Generation)
		prev = append(prev, e.Previous)
		deleted = append(deleted, e.Deleted)
	}
	b.Queue(historySQL, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], cols[6], versions, cols[7], gens, cols[8],
		prev, deleted).Exec(
		func(pgconn.CommandTag) error { return nil })
}

// Projection is a resource's current state.
type Projection struct {
	Resource       message.Resource `json:"resource"`
	Version        *int64           `json:"provider_version"`
	State          json.RawMessage  `json:"state"`
	Status         string           `json:"status"`
	Deleted        bool             `json:"deleted"`
	NeedsReconcile bool             `json:"needs_reconcile"`
	// NeedsReconcileReason says why it is parked (the latest cause).
	NeedsReconcileReason string `json:"needs_reconcile_reason,omitempty"`
	// ParkedAt is when it was parked; nil when it is not.
	ParkedAt *time.Time `json:"parked_at,omitempty"`
	// ReconcileCheckedAt is when the reconciler last sent a check for it
	// while parked; nil when none was sent yet.
	ReconcileCheckedAt *time.Time `json:"reconcile_checked_at,omitempty"`
	SourceEventID      string     `json:"source_event_id"`
	Generation         int64      `json:"fence_generation"`
	ObservedAt         time.Time  `json:"observed_at"`
	UpdatedAt          time.Time  `json:"updated_at"`
}

// Get reads one projection.
func Get(ctx context.Context, pool *pgxpool.Pool, r message.Resource) (Projection, error) {
	p := Projection{Resource: r}
	var state []byte
	var status, src *string
	err := pool.QueryRow(ctx, `
SELECT provider_version, state, status, deleted, needs_reconcile, coalesce(needs_reconcile_reason, ''), parked_at,
       reconcile_checked_at, source_event_id, fence_generation, observed_at, updated_at
FROM projection
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5`,
		r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID).Scan(
		&p.Version, &state, &status, &p.Deleted, &p.NeedsReconcile, &p.NeedsReconcileReason, &p.ParkedAt,
		&p.ReconcileCheckedAt, &src, &p.Generation, &p.ObservedAt, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, ErrNotFound
	}
	if err != nil {
		return p, fmt.Errorf("read projection %s: %w", r.Key(), err)
	}
	p.State = state
	if status != nil {
		p.Status = *status
	}
	if src != nil {
		p.SourceEventID = *src
	}
	return p, nil
}

// History reads a resource's latest history entries, newest first.
func History(ctx context.Context, pool *pgxpool.Pool, r message.Resource, limit int) ([]HistoryEntry, error) {
	rows, err := pool.Query(ctx, `
SELECT id, coalesce(event_id, ''), outcome, provider_version, coalesce(status, ''), coalesce(deleted, false), previous_status,
       coalesce(fence_generation, 0), coalesce(detail, ''), recorded_at
FROM projection_history
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5
ORDER BY id DESC LIMIT $6`, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, limit)
	if err != nil {
		return nil, fmt.Errorf("read projection history %s: %w", r.Key(), err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (HistoryEntry, error) {
		e := HistoryEntry{Resource: r}
		err := row.Scan(&e.ID, &e.EventID, &e.Outcome, &e.Version, &e.Status, &e.Deleted, &e.Previous, &e.Generation, &e.Detail, &e.RecordedAt)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("read projection history %s: %w", r.Key(), err)
	}
	return out, nil
}

// HistoryTableName is projection_history, RANGE-partitioned on recorded_at
// (migration 00022).
const HistoryTableName = "projection_history"

// HistoryTable is projection_history's partition rule: partitions interval
// wide, dropped whole once their range ended age ago (retention.history_age;
// 0 keeps them). Nothing in a partition outlives it: history is a record
// of what happened, and the projection itself keeps the current state.
func HistoryTable(interval, age time.Duration) partition.Table {
	return partition.Table{Name: HistoryTableName, Interval: interval, Horizon: age}
}
