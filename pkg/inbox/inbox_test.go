package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
)

var endpoint = &provider.Endpoint{ID: "stripe-test", Provider: provider.Stripe, SourceAccount: "acct_owner", Environment: "test"}

func record(id, sub string) *inbox.Record {
	return &inbox.Record{Endpoint: endpoint, Event: provider.Event{
		ID: id, Type: "customer.subscription.updated", ResourceType: "subscription", ResourceID: sub,
		Payload: []byte(`{"id":"` + id + `","type":"customer.subscription.updated"}`),
	}}
}

func key(id string) inbox.Key {
	return inbox.Key{Provider: endpoint.Provider, SourceAccount: endpoint.SourceAccount, Environment: endpoint.Environment, EventID: id}
}

func insert(t *testing.T, pool *pgxpool.Pool, recs ...*inbox.Record) []inbox.Result {
	t.Helper()
	res, err := inbox.Insert(t.Context(), pool, recs, time.Now())
	require.NoError(t, err)
	require.Len(t, res, len(recs))
	return res
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

type outboxRow struct {
	Key     string
	Message map[string]any
}

func outbox(t *testing.T, pool *pgxpool.Pool) []outboxRow {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT message_key, message::jsonb FROM outbox ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		require.NoError(t, rows.Scan(&r.Key, &r.Message))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

func status(t *testing.T, pool *pgxpool.Pool, id string) string {
	t.Helper()
	row, err := inbox.Get(t.Context(), pool, key(id), false)
	require.NoError(t, err)
	return row.Status
}

// park simulates a relay that published the events' messages and a
// processor that then parked them: no outbox rows left, status retrying.
func park(t *testing.T, pool *pgxpool.Pool, nextAttempt time.Time, ids ...string) {
	t.Helper()
	exec(t, pool, `DELETE FROM outbox`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'retrying', attempts = 1, last_error = 'provider timeout', next_attempt_at = $1
WHERE event_id = ANY($2)`, nextAttempt, ids)
}

func TestInsertStoresFirstCopyOfAnEventInABatchOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool

	res := insert(t, pool, record("evt_a", "sub_1"), record("evt_a", "sub_1"), record("evt_b", "sub_2"), record("evt_c", "sub_1"))
	require.Equal(t, []inbox.Result{inbox.Accepted, inbox.Duplicate, inbox.Accepted, inbox.Accepted}, res)
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM webhook_inbox`))
	out := outbox(t, pool)
	require.Len(t, out, 3)
	byEvent := map[string]string{}
	for _, o := range out {
		byEvent[o.Message["event_id"].(string)] = o.Key
		require.Equal(t, "webhook", o.Message["reason"])
	}
	require.Equal(t, map[string]string{
		"evt_a": "stripe/acct_owner/test/subscription/sub_1",
		"evt_b": "stripe/acct_owner/test/subscription/sub_2",
		"evt_c": "stripe/acct_owner/test/subscription/sub_1",
	}, byEvent)

	// A later batch: a repeat creates no work; ignored and malformed events
	// are stored but create no work either.
	ignored := record("evt_ign", "sub_1")
	ignored.Ignored = true
	malformed := record("malformed-1", "")
	malformed.Event.Payload = []byte("not json")
	malformed.Malformed = "malformed event: invalid character"
	res = insert(t, pool, record("evt_a", "sub_1"), record("evt_d", ""), ignored, malformed)
	require.Equal(t, []inbox.Result{inbox.Duplicate, inbox.Accepted, inbox.Ignored, inbox.Kept}, res)
	require.Equal(t, 6, count(t, pool, `SELECT count(*) FROM webhook_inbox`))
	out = outbox(t, pool)
	require.Len(t, out, 4)
	require.Equal(t, "evt_d", out[3].Message["event_id"])
	require.Equal(t, "stripe/acct_owner/test/event/evt_d", out[3].Key, "an event about no resource is keyed by itself")
	require.Equal(t, inbox.StatusIgnored, status(t, pool, "evt_ign"))
	require.Equal(t, inbox.StatusDead, status(t, pool, "malformed-1"))
	row, err := inbox.Get(t.Context(), pool, key("malformed-1"), false)
	require.NoError(t, err)
	require.NotNil(t, row.LastError)
	require.Equal(t, "malformed event: invalid character", *row.LastError)
}

// Every body is stored once, as the bytes received, in webhook_inbox_body
// (none in the ledger's legacy columns): bytes jsonb would refuse (NUL,
// invalid UTF-8, lone surrogates, huge numbers, not JSON at all) go in with
// their batch-mates and come back byte for byte, as the processor reads them.
func TestInsertKeepsEveryBodyOnceByteForByte(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool

	bodies := []string{
		`{"a":"plain"}`,
		`{"a":"\ud83d\ude00 paired surrogates"}`,
		`{"a":"\u0000"}`,
		`{"a":"\ud800"}`,
		"{\"a\":\"\xc3\x28\"}",
		`{"a":1e999999}`,
		`not json`,
	}
	var recs []*inbox.Record
	var keys []inbox.Key
	for i, b := range bodies {
		r := record(fmt.Sprintf("evt_%02d", i), "sub_1")
		r.Event.Payload = []byte(b)
		if i%2 == 0 {
			r.Raw = r.Event.Payload // an endpoint with store_raw: still one copy
		}
		recs = append(recs, r)
		keys = append(keys, r.Key())
	}
	for _, res := range insert(t, pool, recs...) {
		require.Equal(t, inbox.Accepted, res)
	}
	require.Zero(t, count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE payload IS NOT NULL OR raw_body IS NOT NULL`), "no copy in the ledger")
	require.Equal(t, len(bodies), count(t, pool, `SELECT count(*) FROM webhook_inbox_body`), "one body row per event")
	loaded, err := inbox.Load(t.Context(), pool, keys)
	require.NoError(t, err)
	for i, b := range bodies {
		require.Equal(t, []byte(b), loaded[keys[i]].Payload, "body %q kept byte for byte", b)
	}
}

func TestCommitterRefusesAfterStopAndWritesNothingForCancelledRequests(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	log := slog.New(slog.DiscardHandler)

	t.Run("stopped", func(t *testing.T) {
		c := inbox.NewCommitter(pool, log, inbox.CommitterConfig{Workers: 2})
		c.Stop()
		c.Stop() // idempotent
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		_, err := c.Submit(ctx, record("evt_after_stop", "sub_1"))
		require.ErrorIs(t, err, inbox.ErrStopped)
		require.Zero(t, count(t, pool, `SELECT count(*) FROM webhook_inbox`))
	})

	t.Run("cancelled", func(t *testing.T) {
		c := inbox.NewCommitter(pool, log, inbox.CommitterConfig{Workers: 2})
		t.Cleanup(c.Stop)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		// Repeat so that both the queueing and the worker's check are hit.
		for i := range 50 {
			_, err := c.Submit(ctx, record(fmt.Sprintf("evt_cancelled_%d", i), "sub_1"))
			require.ErrorIs(t, err, context.Canceled)
		}
		expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
		defer cancel2()
		_, err := c.Submit(expired, record("evt_expired", "sub_1"))
		require.ErrorIs(t, err, context.DeadlineExceeded)

		require.Zero(t, count(t, pool, `SELECT count(*) FROM webhook_inbox`))
		require.Zero(t, count(t, pool, `SELECT count(*) FROM outbox`))

		// The committer still works for live requests.
		res, err := c.Submit(t.Context(), record("evt_live", "sub_1"))
		require.NoError(t, err)
		require.Equal(t, inbox.Accepted, res)
		res, err = c.Submit(t.Context(), record("evt_live", "sub_1"))
		require.NoError(t, err)
		require.Equal(t, inbox.Duplicate, res)
	})
}

func TestEnqueueDueResendsOnlyDueRetriesOnTheirOriginalKey(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	now := time.Now()

	insert(t, pool, record("evt_due", "sub_1"), record("evt_later", "sub_2"), record("evt_none", ""))
	original := map[string]string{}
	for _, o := range outbox(t, pool) {
		original[o.Message["event_id"].(string)] = o.Key
	}
	park(t, pool, now.Add(-time.Minute), "evt_due", "evt_none")
	park(t, pool, now.Add(time.Hour), "evt_later")

	n, err := inbox.EnqueueDue(t.Context(), pool, now, 100)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)

	out := outbox(t, pool)
	require.Len(t, out, 2)
	for _, o := range out {
		id := o.Message["event_id"].(string)
		require.Equal(t, original[id], o.Key, "a retry goes to the original key, so the same partition")
		require.Equal(t, "event", o.Message["kind"])
		require.Equal(t, "retry", o.Message["reason"])
		require.Equal(t, "stripe-test", o.Message["endpoint_id"])
		require.Equal(t, "customer.subscription.updated", o.Message["event_type"])
		row, err := inbox.Get(t.Context(), pool, key(id), false)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusPending, row.Status)
		require.NotNil(t, row.NextAttemptAt, "remembers when it was re-published")
		require.WithinDuration(t, time.Now(), *row.NextAttemptAt, time.Minute)
		require.Equal(t, 1, row.Attempts, "attempts are kept")
	}
	require.ElementsMatch(t, []string{"evt_due", "evt_none"}, []string{out[0].Message["event_id"].(string), out[1].Message["event_id"].(string)})

	later, err := inbox.Get(t.Context(), pool, key("evt_later"), false)
	require.NoError(t, err)
	require.Equal(t, inbox.StatusRetrying, later.Status, "not due: untouched")
	require.NotNil(t, later.NextAttemptAt)

	// Nothing more is due.
	n, err = inbox.EnqueueDue(t.Context(), pool, now, 100)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, outbox(t, pool), 2)
}

func TestConcurrentEnqueueDueNeverEnqueuesARowTwice(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	now := time.Now()

	const events = 300
	recs := make([]*inbox.Record, events)
	ids := make([]string, events)
	for i := range recs {
		ids[i] = fmt.Sprintf("evt_%03d", i)
		recs[i] = record(ids[i], fmt.Sprintf("sub_%d", i%7))
	}
	insert(t, pool, recs...)

	// Several rounds, since a race is not lost every time.
	for round := range 5 {
		park(t, pool, now.Add(-time.Minute), ids...)
		const workers = 4
		var (
			start = make(chan struct{})
			wg    sync.WaitGroup
			total = make([]int64, workers)
			errs  = make([]error, workers)
		)
		for w := range workers {
			wg.Go(func() {
				<-start
				for {
					n, err := inbox.EnqueueDue(t.Context(), pool, now, events)
					if err != nil {
						errs[w] = err
						return
					}
					total[w] += n
					if n == 0 {
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
		var sum int64
		for w := range workers {
			require.NoError(t, errs[w])
			sum += total[w]
		}
		require.EqualValues(t, events, sum, "round %d", round)
		require.Equal(t, events, count(t, pool, `SELECT count(*) FROM outbox`), "round %d", round)
		require.Equal(t, events, count(t, pool, `SELECT count(DISTINCT message::jsonb->>'event_id') FROM outbox`), "round %d", round)
		require.Equal(t, events, count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending'`), "round %d", round)
	}
}

func TestReplayReenqueuesDeadEventOnceAndNeverAnIgnoredOne(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool

	ignored := record("evt_ignored", "sub_1")
	ignored.Ignored = true
	insert(t, pool, record("evt_dead", "sub_1"), ignored)
	original := outbox(t, pool)
	require.Len(t, original, 1)
	exec(t, pool, `DELETE FROM outbox`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'dead', attempts = 8, last_error = 'gave up', processed_at = now()
WHERE event_id = 'evt_dead'`)

	n, err := inbox.Replay(t.Context(), pool, key("evt_dead"))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	row, err := inbox.Get(t.Context(), pool, key("evt_dead"), false)
	require.NoError(t, err)
	require.Equal(t, inbox.StatusPending, row.Status)
	require.Nil(t, row.ProcessedAt)
	out := outbox(t, pool)
	require.Len(t, out, 1)
	require.Equal(t, original[0].Key, out[0].Key)
	require.Equal(t, "replay", out[0].Message["reason"])
	require.Equal(t, "evt_dead", out[0].Message["event_id"])

	n, err = inbox.Replay(t.Context(), pool, key("evt_ignored"))
	require.ErrorIs(t, err, inbox.ErrIgnored)
	require.Zero(t, n)
	require.Equal(t, inbox.StatusIgnored, status(t, pool, "evt_ignored"))

	n, err = inbox.Replay(t.Context(), pool, key("evt_unknown"))
	require.ErrorIs(t, err, inbox.ErrNotFound)
	require.Zero(t, n)
	require.Len(t, outbox(t, pool), 1, "only the dead event was enqueued")
}

func TestPurgePayloadsDropsOnlyFinishedPayloadsAndKeepsIdentities(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	now := time.Now()

	ids := []string{"processed_old", "processed_old_2", "ignored_old", "processed_new", "dead_old", "retrying_old", "pending_old"}
	var recs []*inbox.Record
	for _, id := range ids {
		r := record(id, "sub_1")
		r.Raw = r.Event.Payload
		recs = append(recs, r)
	}
	insert(t, pool, recs...)
	legacyLayout(t, pool)
	exec(t, pool, `UPDATE webhook_inbox SET status = split_part(event_id, '_', 1)`)
	exec(t, pool, `UPDATE webhook_inbox SET received_at = $1 WHERE event_id LIKE '%old%'`, now.Add(-48*time.Hour))
	exec(t, pool, `UPDATE webhook_inbox SET outcome = 'applied', payload = payload || '{"created": 1700000000}' WHERE status = 'processed'`)

	// chunk 1 makes it loop.
	n, err := inbox.PurgePayloads(t.Context(), pool, now.Add(-24*time.Hour), 1)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)

	for _, id := range ids {
		var hasPayload, hasRaw bool
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT payload IS NOT NULL, raw_body IS NOT NULL FROM webhook_inbox WHERE event_id = $1`, id).
			Scan(&hasPayload, &hasRaw))
		purged := id == "processed_old" || id == "processed_old_2" || id == "ignored_old"
		require.Equal(t, !purged, hasPayload, "%s payload", id)
		require.Equal(t, !purged, hasRaw, "%s raw body", id)
	}
	require.Equal(t, len(ids), count(t, pool, `SELECT count(*) FROM webhook_inbox`), "identity rows stay")

	// A late repeat of a purged event is still recognised.
	require.Equal(t, []inbox.Result{inbox.Duplicate}, insert(t, pool, record("processed_old", "sub_1")))

	// Status and decision stay; the provider's time moved to occurred_at.
	var st string
	var outcome *string
	var occurred *time.Time
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT status, outcome, occurred_at FROM webhook_inbox WHERE event_id = 'processed_old_2'`).
		Scan(&st, &outcome, &occurred))
	require.Equal(t, inbox.StatusProcessed, st)
	require.NotNil(t, outcome)
	require.Equal(t, "applied", *outcome)
	require.NotNil(t, occurred, "provider time kept")
	require.Equal(t, int64(1700000000), occurred.Unix())

	// A purged event has nothing left to apply: a replay leaves it alone and says why.
	n, err = inbox.Replay(t.Context(), pool, key("processed_old"))
	require.ErrorIs(t, err, inbox.ErrPurged)
	require.Zero(t, n)
	replayed, skipped, err := inbox.ReplayEvents(t.Context(), pool, []inbox.Key{key("processed_old"), key("processed_new")})
	require.NoError(t, err)
	require.Equal(t, 1, replayed)
	require.Equal(t, map[inbox.Key]string{key("processed_old"): inbox.SkipPurged}, skipped)

	n, err = inbox.PurgePayloads(t.Context(), pool, now.Add(-24*time.Hour), 1000)
	require.NoError(t, err)
	require.Zero(t, n)
}

func TestPurgePayloadsRefusesNonPositiveChunk(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	// LIMIT 0 purges nothing, so a zero chunk would loop until ctx ends.
	_, err := inbox.PurgePayloads(ctx, pool, time.Now(), 0)
	require.ErrorContains(t, err, "chunk")
	require.NoError(t, ctx.Err(), "returned at once, not when the context ended")
}

// Purge runs while operators replay the same old events. Whatever the
// interleaving, no pending event is left without its payload and every
// pending event has its outbox row: purge skips what is pending (or being
// replayed), and a replay skips what was purged. Fails without either check.
func TestPurgeNeverTouchesPendingWorkUnderConcurrentReplays(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewWithConns(t, 12).Pool
	const n = 400
	var recs []*inbox.Record
	for i := range n {
		recs = append(recs, record(fmt.Sprintf("evt_%03d", i), "sub_1"))
	}
	insert(t, pool, recs...)
	legacyLayout(t, pool)
	exec(t, pool, `DELETE FROM outbox`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'processed', processed_at = now(), received_at = now() - interval '48 hours'`)

	var wg sync.WaitGroup
	var replays atomic.Int64
	started := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				_, err := inbox.Replay(t.Context(), pool, key(fmt.Sprintf("evt_%03d", i)))
				// Racing the purge, a replay may find the event purged or
				// held by the purge's transaction: both are answers, not failures.
				if !errors.Is(err, inbox.ErrPurged) && !errors.Is(err, inbox.ErrBusy) {
					assert.NoError(t, err)
				}
				if replays.Add(1) == 40 {
					close(started) // let purges begin while replays go on
				}
			}
		}()
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-started
			for range 5 {
				_, err := inbox.PurgePayloads(t.Context(), pool, time.Now().Add(-24*time.Hour), 7)
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()

	require.Zero(t, count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending' AND payload IS NULL AND raw_body IS NULL`),
		"pending events without a payload")
	pending := count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending'`)
	require.Equal(t, pending, count(t, pool, `SELECT count(*) FROM outbox`), "one outbox row per pending event")
	require.Positive(t, pending, "some replays went through")
	require.Positive(t, count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE payload IS NULL`), "some purges went through")
}

// The provider's event time is stored with the event, so it outlives the
// payload; an event without one stores NULL.
func TestInsertStoresTheProvidersEventTime(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	with := record("evt_timed", "sub_1")
	with.Event.OccurredAt = at
	insert(t, pool, with, record("evt_untimed", "sub_1"))
	var got *time.Time
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT occurred_at FROM webhook_inbox WHERE event_id = 'evt_timed'`).Scan(&got))
	require.NotNil(t, got)
	require.True(t, at.Equal(*got), "stored %v", *got)
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT occurred_at FROM webhook_inbox WHERE event_id = 'evt_untimed'`).Scan(&got))
	require.Nil(t, got)
}

// A replayed old event is pending again with a fresh re-publish time, so the
// stuck-event sweep does not publish it a second time while the replay's
// own message is still on its way. Fails if the re-publish time is not set.
func TestReplayedOldEventIsNotRequeuedAsStuck(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	insert(t, pool, record("evt_week_old", "sub_1"))
	exec(t, pool, `DELETE FROM outbox`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'dead', received_at = now() - interval '7 days'`)
	n, err := inbox.Replay(t.Context(), pool, key("evt_week_old"))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	pub, err := inbox.PublishedPending(t.Context(), pool, time.Now().Add(-10*time.Minute), 100)
	require.NoError(t, err)
	require.Empty(t, pub, "published again right after the replay")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM outbox`))
}

func TestSafeTextStoresAnyBytes(t *testing.T) {
	t.Parallel()
	require.Equal(t, "a\ufffdb\ufffdc", inbox.SafeText("a\x00b\xffc", 100))
	require.Equal(t, "é", inbox.SafeText("éé", 3), "cut on a rune boundary")
}
