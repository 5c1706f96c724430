package inbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/partition"
)

// This file holds the processor's per-batch statements: the load of a
// batch's rows, and the marks it queues into its own write transaction, so
// an event is marked in the transaction of its effect (invariant 7).

// Loaded is an inbox row as the processor reads it for a batch.
type Loaded struct {
	Key
	EndpointID, EventType    string
	ResourceType, ResourceID string
	Version                  *int64
	// Payload is the event's body as received; nil once purged.
	Payload    []byte
	Status     string
	Attempts   int
	ReceivedAt time.Time
	// FirstFailedAt is when the current run of failures began; nil when
	// the event has not failed since it was received or replayed.
	FirstFailedAt *time.Time
}

// loadSQL looks each key up by the primary key. A plain join lets the
// planner pick a merge or hash join for large batches, reading every row of
// the account (all rows share provider, account and environment); the
// LATERAL subquery with LIMIT 1 cannot be flattened into a join, so it stays
// one index probe per key. The probe is by the primary key because no other
// index begins with its columns: while webhook_inbox_resource did, a table
// without statistics made the two tie and each probe could read the whole
// account (migration 00006; TestHotStatementsUseTheirIndexWithOrWithoutStatistics).
// It reads no body from webhook_inbox_body: see loadWithBodiesSQL and
// loadBodiesSQL. A row received before bodies moved to webhook_inbox_body
// (migration 00021) has body_at NULL and its body in the legacy columns,
// read here.
const loadSQL = loadColumns + `NULL::bytea` + loadRows

const loadColumns = `
SELECT w.provider, w.source_account, w.environment, w.event_id, w.endpoint_id, w.event_type,
       w.resource_type, w.resource_id, w.resource_version, w.body_at,
       CASE WHEN w.body_at IS NULL THEN coalesce(convert_to(w.payload::text, 'UTF8'), w.raw_body) END,
       w.status, w.attempts, w.received_at, w.first_failed_at, `

const loadRows = `
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(provider, source_account, environment, event_id)
CROSS JOIN LATERAL (
    SELECT * FROM webhook_inbox i
    WHERE i.provider = k.provider AND i.source_account = k.source_account
      AND i.environment = k.environment AND i.event_id = k.event_id
    LIMIT 1
) w`

// loadWithBodiesSQL is loadSQL that also reads, in the same round trip,
// the bodies stored in the partition named (the one that receives now's
// events, where a batch's bodies mostly are): one primary-key probe of that
// partition per row, planned once per connection and partition. A row whose
// body_at falls outside the partition finds nothing there; Load reads its
// body after, from its own partition (loadBodies).
func loadWithBodiesSQL(part string) string {
	return loadColumns + `b.body` + loadRows + `
LEFT JOIN LATERAL (
    SELECT b.body FROM ` + pgx.Identifier{part}.Sanitize() + ` b
    WHERE b.provider = w.provider AND b.source_account = w.source_account AND b.environment = w.environment
      AND b.event_id = w.event_id AND b.stored_at = w.body_at
    LIMIT 1
) b ON true`
}

// The processor reads a batch's bodies after its ledger rows (loadSQL), in
// a statement of its own. A lookup whose stored_at comes from the ledger
// row (a value of the executing statement) is pruned only while it runs:
// its plan holds every partition of webhook_inbox_body and locks and opens
// each one with its index at every execution, about 13 µs per partition
// (16 keys: 0.54 ms with one partition, 1.3 ms with 64; BenchmarkLoadBodies).
// Planning the statement for the batch's stored_at values instead costs
// 0.3 ms a batch. So Load names the partition: it knows the body table's
// partitions (bodyParts, read again when a body_at falls outside them) and
// reads each partition's bodies from that partition (partitionBodiesSQL),
// a statement planned once per connection and partition, which locks and
// reads that partition only. loadBodiesSQL, planned for each execution
// over the parent, reads what the cache cannot place (a partition dropped
// or created since it was read).
const loadBodiesSQL = `
SELECT k.provider, k.source_account, k.environment, k.event_id, b.body
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS k(provider, source_account, environment, event_id, stored_at)
CROSS JOIN LATERAL (
    SELECT b.body FROM webhook_inbox_body b
    WHERE b.provider = k.provider AND b.source_account = k.source_account AND b.environment = k.environment
      AND b.event_id = k.event_id AND b.stored_at = k.stored_at
      AND b.stored_at = ANY($5::timestamptz[])
    LIMIT 1
) b`

// partitionBodiesSQL is loadBodiesSQL on the partition named.
func partitionBodiesSQL(name string) string {
	return `
SELECT k.provider, k.source_account, k.environment, k.event_id, b.body
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS k(provider, source_account, environment, event_id, stored_at)
CROSS JOIN LATERAL (
    SELECT b.body FROM ` + pgx.Identifier{name}.Sanitize() + ` b
    WHERE b.provider = k.provider AND b.source_account = k.source_account AND b.environment = k.environment
      AND b.event_id = k.event_id AND b.stored_at = k.stored_at
    LIMIT 1
) b`
}

// bodyParts holds, per pool (a pool names one schema), the partitions of
// webhook_inbox_body as last read; a pool's entry goes with the pool.
var bodyParts sync.Map // weak.Pointer[pgxpool.Pool] → *partCache

type partCache struct {
	mu     sync.Mutex
	parts  []partition.Partition
	readAt time.Time
}

func partsOf(pool *pgxpool.Pool) *partCache {
	key := weak.Make(pool)
	if v, ok := bodyParts.Load(key); ok {
		return v.(*partCache)
	}
	v, loaded := bodyParts.LoadOrStore(key, &partCache{})
	if !loaded {
		runtime.AddCleanup(pool, func(k weak.Pointer[pgxpool.Pool]) { bodyParts.Delete(k) }, key)
	}
	return v.(*partCache)
}

// place returns the partition holding at, if the cache knows one.
func (c *partCache) place(at time.Time) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.parts {
		if p.Holds(at) {
			return p.Name, true
		}
	}
	return "", false
}

func (c *partCache) refresh(ctx context.Context, pool *pgxpool.Pool) error {
	parts, err := partition.List(ctx, pool, BodyTableName)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.parts, c.readAt = parts, time.Now()
	c.mu.Unlock()
	return nil
}

// current returns the bounded partition that holds now, reading the
// partitions again when the cache has none and was read over a second ago
// (partitions are created ahead, so that is a partition created since).
// It returns false when there is none, or the partitions cannot be read:
// Load then reads every body after the rows.
func (c *partCache) current(ctx context.Context, pool *pgxpool.Pool, now time.Time) (partition.Partition, bool) {
	find := func() (partition.Partition, bool, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.parts {
			if p.From != nil && p.To != nil && p.Holds(now) {
				return p, true, false
			}
		}
		return partition.Partition{}, false, time.Since(c.readAt) > time.Second
	}
	p, ok, stale := find()
	if ok || !stale {
		return p, ok
	}
	if err := c.refresh(ctx, pool); err != nil {
		return partition.Partition{}, false
	}
	p, ok, _ = find()
	return p, ok
}

// bodySQL is the body of the inbox row w: its row in webhook_inbox_body
// (one partition, pruned at run time by stored_at = body_at), else, for a
// row received before bodies moved there (migration 00021), the legacy
// columns. NULL once purged. For statements about a few rows; the
// processor's batches read bodies with loadBodiesSQL.
const bodySQL = `coalesce(
    (SELECT b.body FROM webhook_inbox_body b
     WHERE b.provider = w.provider AND b.source_account = w.source_account AND b.environment = w.environment
       AND b.event_id = w.event_id AND b.stored_at = w.body_at),
    convert_to(w.payload::text, 'UTF8'), w.raw_body)`

// hasBodySQL says whether the inbox row w still has a body (bodySQL is not
// NULL), without reading it. A scalar subquery, not EXISTS: EXISTS may be
// planned as a hashed semi-join that reads every partition whole; this
// stays one primary-key probe of one partition per row.
const hasBodySQL = `(w.payload IS NOT NULL OR w.raw_body IS NOT NULL OR (
    SELECT true FROM webhook_inbox_body b
    WHERE b.provider = w.provider AND b.source_account = w.source_account AND b.environment = w.environment
      AND b.event_id = w.event_id AND b.stored_at = w.body_at) IS NOT NULL)`

// Load reads the rows of keys, one primary-key probe each, with the bodies
// stored in the partition that receives now's events (loadWithBodiesSQL),
// then the other bodies; a key with no row is absent from the map. A body
// whose partition was dropped between the two reads is nil, as a purged
// one.
func Load(ctx context.Context, pool *pgxpool.Pool, keys []Key) (map[Key]*Loaded, error) {
	out := make(map[Key]*Loaded, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	p, a, e, id := keyColumns(keys)
	cache := partsOf(pool)
	cur, joined := cache.current(ctx, pool, time.Now())
	var withBody []*Loaded
	var bodyAt []time.Time
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			r := &Loaded{}
			var at *time.Time
			var body []byte
			if err := rows.Scan(&r.Provider, &r.SourceAccount, &r.Environment, &r.EventID, &r.EndpointID, &r.EventType,
				&r.ResourceType, &r.ResourceID, &r.Version, &at, &r.Payload, &r.Status, &r.Attempts, &r.ReceivedAt, &r.FirstFailedAt,
				&body); err != nil {
				return err
			}
			out[r.Key] = r
			switch {
			case at == nil:
			case joined && cur.Holds(*at):
				r.Payload = body // nil once purged
			default:
				withBody, bodyAt = append(withBody, r), append(bodyAt, *at)
			}
		}
		return rows.Err()
	}
	var err error
	if joined {
		_, err = probed(ctx, pool, scan, loadWithBodiesSQL(cur.Name), p, a, e, id)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
			// The partition was dropped since the cache was read: read
			// the partitions again, and this batch without it.
			if err := cache.refresh(ctx, pool); err != nil {
				return nil, fmt.Errorf("load inbox rows: %w", err)
			}
			clear(out)
			withBody, bodyAt, joined = nil, nil, false
		}
	}
	if !joined {
		var rows pgx.Rows
		if rows, err = pool.Query(ctx, loadSQL, p, a, e, id); err == nil {
			err = scan(rows)
			rows.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("load inbox rows: %w", err)
	}
	if len(withBody) == 0 {
		return out, nil
	}
	if err := loadBodies(ctx, pool, out, withBody, bodyAt); err != nil {
		return nil, fmt.Errorf("load inbox bodies: %w", err)
	}
	return out, nil
}

// bodyRef is a row whose body is to be read, and where it is.
type bodyRef struct {
	row *Loaded
	at  time.Time
}

// loadBodies sets the Payload of rows from webhook_inbox_body, each row's
// partition read directly; see loadBodiesSQL.
func loadBodies(ctx context.Context, pool *pgxpool.Pool, out map[Key]*Loaded, rows []*Loaded, ats []time.Time) error {
	cache := partsOf(pool)
	byPart := map[string][]bodyRef{}
	var unplaced []bodyRef
	place := func(refs []bodyRef) []bodyRef {
		var left []bodyRef
		for _, r := range refs {
			if name, ok := cache.place(r.at); ok {
				byPart[name] = append(byPart[name], r)
			} else {
				left = append(left, r)
			}
		}
		return left
	}
	refs := make([]bodyRef, len(rows))
	for i, r := range rows {
		refs[i] = bodyRef{row: r, at: ats[i]}
	}
	if unplaced = place(refs); len(unplaced) > 0 {
		// A partition created since the cache was read (or never read).
		if err := cache.refresh(ctx, pool); err != nil {
			return err
		}
		unplaced = place(unplaced)
	}
	scan := func(rows pgx.Rows) error {
		for rows.Next() {
			var k Key
			var body []byte
			if err := rows.Scan(&k.Provider, &k.SourceAccount, &k.Environment, &k.EventID, &body); err != nil {
				return err
			}
			if r := out[k]; r != nil {
				r.Payload = body
			}
		}
		return rows.Err()
	}
	if len(byPart) > 0 {
		b := &pgx.Batch{}
		b.Queue(bodyProbesSQL)
		for name, refs := range byPart {
			p, a, e, id, at := refColumns(refs)
			b.Queue(partitionBodiesSQL(name), p, a, e, id, at).Query(scan)
		}
		if err := pool.SendBatch(ctx, b).Close(); err != nil {
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != "42P01" { // undefined_table
				return err
			}
			// A partition dropped since the cache was read: read it again,
			// and these bodies through the parent.
			if err := cache.refresh(ctx, pool); err != nil {
				return err
			}
			for _, refs := range byPart {
				unplaced = append(unplaced, refs...)
			}
		}
	}
	if len(unplaced) == 0 {
		return nil
	}
	p, a, e, id, at := refColumns(unplaced)
	_, err := probedWith(ctx, pool, bodyBatchSQL, scan, loadBodiesSQL, p, a, e, id, at)
	return err
}

func refColumns(refs []bodyRef) (p, a, e, id []string, at []time.Time) {
	keys := make([]Key, len(refs))
	at = make([]time.Time, len(refs))
	for i, r := range refs {
		keys[i], at[i] = r.row.Key, r.at
	}
	p, a, e, id = keyColumns(keys)
	return p, a, e, id, at
}

// Mark is what became of a loaded pending event.
type Mark struct {
	Key
	Status   string
	Outcome  string
	LastErr  *string
	Attempts int
	// Next is the next attempt of a retrying event.
	Next *time.Time
	// FirstFailed is when the current run of failures began (nil once the
	// event succeeded).
	FirstFailed *time.Time
}

// markSQL sets each event's outcome, only while the row is still as the
// batch loaded it (pending). That status comes from the input rows, not from
// a literal: with "status = 'pending'" the planner can prove the partial
// index webhook_inbox_pending applies, and with statistics taken while
// nothing was pending that index looks empty and ties with the primary key;
// during a backlog each key's probe through it reads every pending row.
// Compared with a column of the batch, the primary key is the only index
// that fits. QueueMarks turns hash and merge joins off for the rest of its
// transaction before it (markSettings): without statistics, on 100k narrow
// ledger rows, the planner otherwise hash-joins the batch with the whole
// ledger. A row updated concurrently
// is checked again in its new version (the update waits for the other
// transaction, then re-evaluates the status against it), so a mark applies
// only to a still-pending event.
// Nested loops over the primary key are the plan whatever the statistics
// (TestHotStatementsUseTheirIndexWithOrWithoutStatistics).
const markSQL = `
UPDATE webhook_inbox w
SET status = u.status, outcome = u.outcome, last_error = u.last_error, attempts = u.attempts,
    next_attempt_at = u.next_attempt_at, first_failed_at = u.first_failed_at,
    processed_at = CASE WHEN u.status IN ('processed', 'dead') THEN now() END
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::int4[], $9::timestamptz[], $10::timestamptz[], $11::text[])
     AS u(provider, source_account, environment, event_id, status, outcome, last_error, attempts, next_attempt_at, first_failed_at, loaded_status)
WHERE w.provider = u.provider AND w.source_account = u.source_account
  AND w.environment = u.environment AND w.event_id = u.event_id AND w.status = u.loaded_status`

// markSettings are the planner settings markSQL is planned under
// (set_config name → value); markSettingsSQL sets them for the rest of the
// transaction.
var (
	markSettings    = map[string]string{"enable_hashjoin": "off", "enable_mergejoin": "off"}
	markSettingsSQL = settingsSQL(markSettings)
)

// settingsSQL is one statement that sets each of settings for the rest of
// its transaction, in name order (one text, one cached statement).
func settingsSQL(settings map[string]string) string {
	calls := make([]string, 0, len(settings))
	for _, name := range slices.Sorted(maps.Keys(settings)) {
		calls = append(calls, fmt.Sprintf("set_config('%s', '%s', true)", name, settings[name]))
	}
	return "SELECT " + strings.Join(calls, ", ")
}

// QueueMarks queues marks into b, for the transaction that applies their
// events' effects. Each mark applies only while its event is still
// pending.
func QueueMarks(b *pgx.Batch, marks []Mark) {
	if len(marks) == 0 {
		return
	}
	n := len(marks)
	cols := make([][]string, 6)
	for i := range cols {
		cols[i] = make([]string, 0, n)
	}
	errs := make([]*string, 0, n)
	attempts := make([]int32, 0, n)
	next := make([]*time.Time, 0, n)
	firstFailed := make([]*time.Time, 0, n)
	loaded := make([]string, 0, n)
	for _, mk := range marks {
		for i, v := range []string{mk.Provider, mk.SourceAccount, mk.Environment, mk.EventID, mk.Status, mk.Outcome} {
			cols[i] = append(cols[i], v)
		}
		errs = append(errs, mk.LastErr)
		attempts = append(attempts, int32(mk.Attempts))
		next = append(next, mk.Next)
		firstFailed = append(firstFailed, mk.FirstFailed)
		loaded = append(loaded, StatusPending)
	}
	b.Queue(markSettingsSQL)
	b.Queue(markSQL, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5], errs, attempts, next, firstFailed, loaded).Exec(func(pgconn.CommandTag) error { return nil })
}

// markDeadSQL marks one event dead while it is pending; the status to find
// is an input row's, for markSQL's reason: only the primary key fits.
const markDeadSQL = `
UPDATE webhook_inbox w
SET status = 'dead', outcome = 'failed', last_error = $5, attempts = w.attempts + 1, processed_at = now()
FROM unnest($6::text[]) AS u(loaded_status)
WHERE w.provider = $1 AND w.source_account = $2 AND w.environment = $3 AND w.event_id = $4 AND w.status = u.loaded_status`

// MarkDead marks the event of k dead with lastError, in the caller's
// transaction (the processor checks its fence in it first), while it is
// pending.
func MarkDead(ctx context.Context, tx pgx.Tx, k Key, lastError string) error {
	_, err := tx.Exec(ctx, markDeadSQL, k.Provider, k.SourceAccount, k.Environment, k.EventID, lastError, []string{StatusPending})
	return err
}
