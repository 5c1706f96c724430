package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"

	"github.com/hookyard/hookyard/pkg/outbox"
	"github.com/hookyard/hookyard/pkg/tracing"
)

// Result says what intake did with a record.
type Result int

const (
	// Accepted: new event, stored with its outbox row.
	Accepted Result = iota + 1
	// Duplicate: the event was already stored; no new work.
	Duplicate
	// Ignored: new event outside the allow-list, stored as ignored.
	Ignored
	// Kept: new malformed delivery, stored dead for inspection.
	Kept
)

func (r Result) String() string {
	switch r {
	case Accepted:
		return "accepted"
	case Duplicate:
		return "duplicate"
	case Ignored:
		return "ignored"
	case Kept:
		return "kept"
	}
	return "unknown"
}

// ErrStopped is returned by Submit after Stop.
var ErrStopped = errors.New("inbox committer stopped")

// MaxBatchDefault is the default of CommitterConfig.MaxBatch.
const MaxBatchDefault = 256

// CommitWorkersDefault is the default of CommitterConfig.Workers: one
// statement in flight per CPU. Fewer statements in flight means more events
// per commit; on a small machine that shares its CPUs with Postgres this is
// the fastest setting measured (see the README's numbers). Raise it when
// Postgres is across a network and round trips, not CPU, are the limit.
var CommitWorkersDefault = runtime.GOMAXPROCS(0)

// CommitterConfig tunes group commit.
type CommitterConfig struct {
	// Workers is the number of statements in flight at once. Defaults to
	// CommitWorkersDefault (GOMAXPROCS).
	Workers int
	// MaxBatch caps the events coalesced into one statement. Defaults to
	// MaxBatchDefault.
	MaxBatch int
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

// Committer coalesces concurrent intake requests into one statement per
// batch (group commit). Each request is answered only after the statement
// that holds its rows committed. Under no concurrency a batch holds one
// request, so latency is one round trip.
type Committer struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	cfg  CommitterConfig
	reqs chan *request
	stop chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	// wake tells the relays about committed outbox rows: intake's
	// statements do not notify from their transactions (package outbox).
	wake       *outbox.Notifier
	stopNotify context.CancelFunc
}

type request struct {
	ctx  context.Context
	rec  *Record
	done chan reply
}

type reply struct {
	res Result
	err error
}

// NewCommitter starts the commit workers.
func NewCommitter(pool *pgxpool.Pool, log *slog.Logger, cfg CommitterConfig) *Committer {
	cfg.Workers = cmp.Or(cfg.Workers, CommitWorkersDefault)
	cfg.MaxBatch = cmp.Or(cfg.MaxBatch, MaxBatchDefault)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Committer{pool: pool, log: log, cfg: cfg, reqs: make(chan *request), stop: make(chan struct{}),
		wake: outbox.NewNotifier(pool, log)}
	ctx, cancel := context.WithCancel(context.Background())
	c.stopNotify = cancel
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.wake.Run(ctx) }()
	for range cfg.Workers {
		c.wg.Add(1)
		go c.work()
	}
	return c
}

// Stop ends the workers after in-flight batches are answered.
func (c *Committer) Stop() {
	c.once.Do(func() { close(c.stop); c.stopNotify() })
	c.wg.Wait()
}

// Submit stores rec durably or returns an error; it never reports success
// for rows that were not committed.
func (c *Committer) Submit(ctx context.Context, rec *Record) (res Result, err error) {
	// One span per request, not per batch: a batch holds many webhooks, and
	// each one's trace shows its own wait for the group commit. Its context
	// is what the outbox message carries to the relay.
	ctx, span := tracing.Start(ctx, "inbox intake commit")
	if span.IsRecording() {
		defer func() { tracing.End(span, err, attribute.String("hookyard.intake.result", res.String())) }()
		span.SetAttributes(tracing.EventAttrs(rec.Endpoint.Provider, rec.Endpoint.SourceAccount, rec.Endpoint.Environment,
			rec.Event.ID, rec.Event.ResourceType, rec.Event.ResourceID)...)
	}
	if rec.TraceParent == "" {
		rec.TraceParent, rec.TraceState = tracing.Parent(ctx)
	}
	// Encoding happens here, on the caller's goroutine, so the commit
	// workers spend their time on the database only.
	if err := rec.prepare(c.cfg.Now()); err != nil {
		return 0, err
	}
	req := &request{ctx: ctx, rec: rec, done: make(chan reply, 1)}
	select {
	case c.reqs <- req:
	case <-c.stop:
		return 0, ErrStopped
	case <-ctx.Done():
		return 0, fmt.Errorf("queue event for commit: %w", ctx.Err())
	}
	// The worker always answers: even when ctx ends, the statement may have
	// committed, and the caller must not guess.
	r := <-req.done
	return r.res, r.err
}

func (c *Committer) work() {
	defer c.wg.Done()
	batch := make([]*request, 0, c.cfg.MaxBatch)
	for {
		select {
		case <-c.stop:
			return
		case r := <-c.reqs:
			batch = append(batch[:0], r)
		}
	drain:
		for len(batch) < c.cfg.MaxBatch {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		c.commit(batch)
	}
}

// commit writes one batch. The statement's deadline is the latest of the
// requests' deadlines: one request about to expire must not cancel the
// statement for the others (they would all be answered 503). A request
// whose own deadline passes still waits for the statement's outcome, at
// most as long as its batch mates' deadlines, which are within the batch's
// coalescing window of its own.
func (c *Committer) commit(batch []*request) {
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- reply{err: fmt.Errorf("commit event: %w", err)}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	ctx := context.WithoutCancel(live[0].ctx)
	var deadline time.Time
	for _, r := range live {
		d, ok := r.ctx.Deadline()
		if !ok {
			deadline = time.Time{}
			break
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	recs := make([]*Record, len(live))
	for i, r := range live {
		recs[i] = r.rec
	}
	results, err := c.insert(ctx, recs)
	if err != nil && rejected(err) {
		// The database refused one request's data: store the others one
		// by one, so only that request is affected, and keep that one dead
		// with its bytes rather than answer 503 to it on every redelivery.
		for _, r := range live {
			res, err := c.insert(ctx, []*Record{r.rec})
			if err != nil && refusedData(err) && r.rec.Malformed == "" {
				res, err = c.insert(ctx, []*Record{r.rec.keptAfter(err)})
			}
			if err != nil {
				r.done <- reply{err: err}
				continue
			}
			r.done <- reply{res: res[0]}
		}
		return
	}
	for i, r := range live {
		if err != nil {
			r.done <- reply{err: err}
			continue
		}
		r.done <- reply{res: results[i]}
	}
}

// insert is Insert with the outbox's trigger quiet, and the relays woken
// once the statement committed an event for them.
func (c *Committer) insert(ctx context.Context, recs []*Record) ([]Result, error) {
	res, err := insert(ctx, c.pool, recs, c.cfg.Now(), true)
	if err == nil && slices.Contains(res, Accepted) {
		c.wake.Wake()
	}
	return res, err
}

// rejected reports whether Postgres refused the statement's data (data
// exceptions, integrity violations, or program limits such as nesting too
// deep) rather than being unavailable.
func rejected(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (strings.HasPrefix(pgErr.Code, "22") || strings.HasPrefix(pgErr.Code, "23") ||
		strings.HasPrefix(pgErr.Code, "54"))
}

// refusedData reports whether Postgres refused the event's own data: a data
// exception or a program limit (the jsonb cast, nesting), or a constraint of
// webhook_inbox. A constraint of another table (the outbox) is an
// operational fault, not the event's: that request is answered 503 and
// retried, never kept dead.
func refusedData(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch {
	case strings.HasPrefix(pgErr.Code, "22"), strings.HasPrefix(pgErr.Code, "54"):
		return true
	case strings.HasPrefix(pgErr.Code, "23"):
		return pgErr.TableName == "webhook_inbox"
	}
	return false
}

// keptAfter is the record to store when the database refused its data: dead,
// under its own identity, with its bytes kept and the reason in a
// form any text column takes.
func (r *Record) keptAfter(err error) *Record {
	reason := "rejected by the database"
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		reason += fmt.Sprintf(" (SQLSTATE %s): %s", pgErr.Code, pgErr.Message)
	}
	kept := *r
	kept.prep = nil
	kept.Malformed, kept.DeadOutcome = SafeText(reason, 500), OutcomeMalformed
	return &kept
}

// SafeText makes s storable in any text column and safe to show: invalid
// UTF-8 and NUL are replaced, and it is cut to at most max bytes.
func SafeText(s string, max int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\ufffd"), "\x00", "\ufffd")
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// insertSQL is intake's one statement: the ledger row, its body in the
// partition of now() (body_at = stored_at, so readers prune to it) and its
// outbox row commit together. A repeat hits the ledger's primary key, which
// partitioning does not split, and writes no body and no outbox row. With no
// partition for now() the whole statement fails (the caller answers 5xx and
// the provider retries): services create partitions ahead at start, the
// reconciler every round.
const insertSQL = `
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                         $7::text[], $8::text[], $9::int8[], $10::bytea[], $11::text[], $12::text[], $13::text[], $14::text[], $15::timestamptz[], $16::text[], $17::text[])
        AS u(provider, source_account, environment, event_id, endpoint_id, event_type,
             resource_type, resource_id, resource_version, body, status, message_key, message, last_error, occurred_at, dead_outcome, trace_parent)
), ins AS (
    INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type,
                               resource_type, resource_id, resource_version, body_at, status, processed_at, outcome, last_error, occurred_at, trace_parent)
    SELECT provider, source_account, environment, event_id, endpoint_id, event_type,
           resource_type, resource_id, resource_version, now(), status,
           CASE WHEN status IN ('ignored', 'dead') THEN now() END,
           CASE WHEN status = 'ignored' THEN 'event type not allowed by endpoint'
                WHEN status = 'dead' THEN dead_outcome END,
           last_error, occurred_at, trace_parent
    FROM input
    -- Rows go in in one fixed order (by key), whatever order requests arrived
    -- in: two statements that share keys then wait on each other in one
    -- direction only and cannot deadlock (40P01 would fail both batches).
    ORDER BY provider, source_account, environment, event_id
    ON CONFLICT (provider, source_account, environment, event_id) DO NOTHING
    RETURNING provider, source_account, environment, event_id, status, body_at
), body AS (
    INSERT INTO webhook_inbox_body (provider, source_account, environment, event_id, stored_at, body)
    SELECT ins.provider, ins.source_account, ins.environment, ins.event_id, ins.body_at, i.body
    FROM ins JOIN input i USING (provider, source_account, environment, event_id)
), out AS (
    INSERT INTO outbox (message_key, message)
    SELECT i.message_key, i.message
    FROM ins JOIN input i USING (provider, source_account, environment, event_id)
    WHERE ins.status = 'pending'
)
SELECT provider, source_account, environment, event_id FROM ins`

// Insert stores records and their outbox rows in one statement (so in one
// transaction) and says for each whether it was new. Copies of one event in
// the same batch count once: the first is the one stored.
func Insert(ctx context.Context, pool *pgxpool.Pool, recs []*Record, now time.Time) ([]Result, error) {
	return insert(ctx, pool, recs, now, false)
}

// insert is Insert; quiet runs outbox.QuietSQL in the statement's
// transaction, and the caller wakes the relays after it.
func insert(ctx context.Context, pool *pgxpool.Pool, recs []*Record, now time.Time, quiet bool) ([]Result, error) {
	n := len(recs)
	var (
		prov, acct, env, eid, epID, etype, rtype, rid = mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n), mk(n)
		status, mkey, msgs                            = mk(n), mk(n), mk(n)
		lastErr, outcomes                             = make([]*string, 0, n), make([]*string, 0, n)
		versions                                      = make([]*int64, 0, n)
		bodies                                        = make([][]byte, 0, n)
		occurred                                      = make([]*time.Time, 0, n)
		traceParents                                  = make([]*string, 0, n)
	)
	first := make(map[Key]int, n)
	for i, r := range recs {
		k := r.Key()
		if _, seen := first[k]; seen {
			continue
		}
		first[k] = i
		if r.prep == nil {
			if err := r.prepare(now); err != nil {
				return nil, err
			}
		}
		pr := r.prep
		prov, acct, env, eid = append(prov, k.Provider), append(acct, k.SourceAccount), append(env, k.Environment), append(eid, k.EventID)
		epID, etype = append(epID, r.Endpoint.ID), append(etype, r.Event.Type)
		rtype, rid = append(rtype, r.Event.ResourceType), append(rid, r.Event.ResourceID)
		status, mkey, msgs = append(status, pr.status), append(mkey, pr.key), append(msgs, pr.msg)
		versions, bodies = append(versions, r.Event.Version), append(bodies, pr.body)
		lastErr, outcomes = append(lastErr, pr.lastErr), append(outcomes, pr.outcome)
		traceParents = append(traceParents, pr.traceParent)
		if t := r.Event.OccurredAt; t.IsZero() {
			occurred = append(occurred, nil)
		} else {
			occurred = append(occurred, &t)
		}
	}
	// A batch is one implicit transaction: QuietSQL's setting holds for
	// the insert and ends with it.
	b := &pgx.Batch{}
	if quiet {
		b.Queue(outbox.QuietSQL)
	}
	b.Queue(insertSQL, prov, acct, env, eid, epID, etype, rtype, rid, versions, bodies, status, mkey, msgs, lastErr, occurred, outcomes, traceParents)
	br := pool.SendBatch(ctx, b)
	defer br.Close()
	if quiet {
		if _, err := br.Exec(); err != nil {
			return nil, fmt.Errorf("insert inbox and outbox rows: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("insert inbox and outbox rows: %w", err)
	}
	inserted := make(map[Key]bool, n)
	for rows.Next() {
		var k Key
		if err := rows.Scan(&k.Provider, &k.SourceAccount, &k.Environment, &k.EventID); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read inserted inbox keys: %w", err)
		}
		inserted[k] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("insert inbox and outbox rows: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("insert inbox and outbox rows: %w", err)
	}
	out := make([]Result, n)
	for i, r := range recs {
		k := r.Key()
		switch {
		case first[k] != i || !inserted[k]:
			out[i] = Duplicate
		case r.Malformed != "":
			out[i] = Kept
		case r.Ignored:
			out[i] = Ignored
		default:
			out[i] = Accepted
		}
	}
	return out, nil
}

func mk(n int) []string { return make([]string, 0, n) }
