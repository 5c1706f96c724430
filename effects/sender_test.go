package effects_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/internal/receiptsim"
	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
)

// request is one request the receiving server saw, its body decoded.
type request struct {
	key      string
	attempt  int
	factID   string
	body     effects.Body
	code     int
	replayed bool
}

// receiver is the receiving server of these tests: a receiptsim server
// (a standard idempotent server: 409 while a key is processed, its stored
// 2xx replayed, 422 for another body) whose work answers answer(key, n),
// n the how-manieth request of that key from 1. An answer of 0 hangs until
// the client gives up, then fails and keeps nothing.
type receiver struct {
	t   *testing.T
	sim *receiptsim.Server
	url string
}

func newReceiver(t *testing.T, answer func(key string, n int) int) *receiver {
	sim := receiptsim.New(func(ctx context.Context, r receiptsim.Request, _ http.Header) int {
		code := answer(r.Key, r.N)
		if code == 0 {
			<-ctx.Done()
			return http.StatusServiceUnavailable
		}
		// Give a second sender time to collide with this request.
		time.Sleep(2 * time.Millisecond)
		return code
	})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	return &receiver{t: t, sim: sim, url: srv.URL}
}

func (r *receiver) requests() []request {
	var out []request
	for _, sr := range r.sim.Requests() {
		var b effects.Body
		if err := json.Unmarshal(sr.Body, &b); err != nil {
			r.t.Errorf("receipt body is not JSON: %v", err)
		}
		attempt, _ := strconv.Atoi(sr.Attempt)
		out = append(out, request{key: sr.Key, attempt: attempt, factID: b.Fact.ID, body: b, code: sr.Code, replayed: sr.Replayed})
	}
	return out
}

func (r *receiver) keys() map[string]int { return r.sim.Keys() }

// paid records an invoice_paid fact and its receipt action, as the
// processor does in one transaction.
func paid(t *testing.T, pool *pgxpool.Pool, invoice, subscription string) action.Key {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
WITH f AS (
    INSERT INTO fact (provider, source_account, environment, fact_type, fact_id, resource_type, resource_id, event_id, data)
    VALUES ('stripe', 'acct_1', 'test', 'invoice_paid', $1, 'subscription', $2, 'evt_' || $1,
            jsonb_build_object('id', $1::text, 'object', 'invoice', 'subscription', $2::text, 'amount_paid', 1200)))
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id)
VALUES ('stripe', 'acct_1', 'test', $1, 'receipt', 'evt_' || $1)`, invoice, subscription)
	require.NoError(t, err)
	return action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: invoice, Kind: action.KindReceipt}
}

func newSender(t *testing.T, pool *pgxpool.Pool, url string, adjust func(*effects.Config)) *effects.Sender {
	t.Helper()
	cfg := effects.Config{ReceiptURL: url, Timeout: 300 * time.Millisecond, LeaseMargin: 200 * time.Millisecond,
		BackoffBase: 10 * time.Millisecond, BackoffMax: 40 * time.Millisecond, PollInterval: 10 * time.Millisecond}
	if adjust != nil {
		adjust(&cfg)
	}
	s, err := effects.New(pool, pipelinetest.Logger(t), cfg)
	require.NoError(t, err)
	return s
}

func show(t *testing.T, pool *pgxpool.Pool, k action.Key) action.Action {
	t.Helper()
	sh, err := action.Show(context.Background(), pool, k, nil)
	require.NoError(t, err)
	return sh.Action
}

// sendUntil calls SendDue until the action reaches status (bounded).
func sendUntil(t *testing.T, s *effects.Sender, pool *pgxpool.Pool, k action.Key, status string) {
	t.Helper()
	for range 200 {
		_, err := s.SendDue(context.Background())
		require.NoError(t, err)
		if show(t, pool, k).Status == status {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("action %s never reached %s: %+v", k, status, show(t, pool, k))
}

// Invariant 9: an attempt that times out after the receiving server got it
// is ambiguous, and is sent again with the same Idempotency-Key; the server
// sees one distinct key, and the receipt is sent. Fails if a timeout is
// taken for success or failure for good, or if a retry carries a new key.
func TestTimedOutReceiptIsSentAgainWithTheSameKey(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_timeout", "sub_1")
	rcv := newReceiver(t, func(_ string, n int) int {
		if n == 1 {
			return 0 // received, then the answer never comes
		}
		return http.StatusOK
	})
	snd := newSender(t, s.Pool, rcv.url, nil)

	n, err := snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	a := show(t, s.Pool, k)
	require.Equal(t, action.StatusAmbiguous, a.Status, "a timed-out attempt must stay open: %+v", a)
	require.Contains(t, a.LastError, "may have arrived")

	sendUntil(t, snd, s.Pool, k, action.StatusSent)
	// A retry that arrives while the server still holds the first request
	// is answered 409 and tried again: two requests or more, one key.
	reqs := rcv.requests()
	require.GreaterOrEqual(t, len(reqs), 2)
	require.Equal(t, map[string]int{"hookyard:stripe:acct_1:test:in_timeout:receipt": len(reqs)}, rcv.keys(), "one distinct key")
	last := reqs[len(reqs)-1]
	require.Equal(t, http.StatusOK, last.code)
	require.Equal(t, len(reqs), last.attempt)
	require.Equal(t, reqs[0].key, last.body.ActionKey)
	require.Equal(t, "in_timeout", last.factID)
	require.JSONEq(t, `{"id":"in_timeout","object":"invoice","subscription":"sub_1","amount_paid":1200}`, string(last.body.Fact.Data))
	a = show(t, s.Pool, k)
	require.Equal(t, len(reqs), a.Attempts)
	require.NotNil(t, a.DoneAt)

	for range 3 {
		n, err := snd.SendDue(context.Background())
		require.NoError(t, err)
		require.Zero(t, n)
	}
	require.Len(t, rcv.requests(), len(reqs), "a sent receipt was sent again")
}

var errKilled = errors.New("sender killed")

// Invariant 9 across a crash: a sender killed between the receiving
// server's 2xx and the status write leaves the action to its lease; the
// next sender sends it again with the same key, and once that success is
// recorded no sender (a restarted one included) ever sends it again.
// Fails if an in-flight action is never retried, is retried under another
// key, or if a sent action is claimed again.
func TestKilledSenderRetrySendsTheSameKeyAndNothingAfterSuccess(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_kill", "sub_1")
	rcv := newReceiver(t, func(string, int) int { return http.StatusOK })

	first := newSender(t, s.Pool, rcv.url, func(c *effects.Config) { c.SenderID = "first" })
	killed := 0
	effects.SetAfterSend(first, func(_ context.Context, key string, attempt int, status string) error {
		// The POST succeeded; the process dies before writing it down.
		require.Equal(t, action.StatusSent, status)
		killed++
		return errKilled
	})
	n, err := first.SendDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, killed)
	a := show(t, s.Pool, k)
	require.Equal(t, action.StatusSending, a.Status, "nothing was written: the action is still held by the dead sender")
	require.Equal(t, "first", a.ClaimedBy)

	second := newSender(t, s.Pool, rcv.url, func(c *effects.Config) { c.SenderID = "second" })
	sendUntil(t, second, s.Pool, k, action.StatusSent)
	reqs := rcv.requests()
	require.Len(t, reqs, 2)
	require.Equal(t, map[string]int{k.String(): 2}, rcv.keys(), "the retry carries the same key")
	require.Equal(t, []int{1, 2}, []int{reqs[0].attempt, reqs[1].attempt})
	require.True(t, reqs[1].replayed, "the server answered the repeat with its stored 2xx")
	a = show(t, s.Pool, k)
	require.Equal(t, 2, a.Attempts)
	require.Contains(t, a.LastError, "attempt 1 interrupted")

	// Restart again, past a whole lease: nothing more goes out.
	third := newSender(t, s.Pool, rcv.url, func(c *effects.Config) { c.SenderID = "third" })
	time.Sleep(600 * time.Millisecond)
	for range 5 {
		for _, snd := range []*effects.Sender{second, third} {
			n, err := snd.SendDue(context.Background())
			require.NoError(t, err)
			require.Zero(t, n)
		}
	}
	require.Len(t, rcv.requests(), 2, "a sent receipt was sent again")
	require.Equal(t, action.StatusSent, show(t, s.Pool, k).Status)
}

// Senders side by side share the work and never send one action at the
// same time, through timeouts (ambiguous, retried after the lease logic)
// and 503s: the receiving server never holds two requests of one key at
// once, never sees a key again after hookyard recorded it sent, and every
// receipt is produced and recorded sent. Fails if claims do not lock (both
// senders take a row), if a lease can end while its request is in flight,
// or if a sent action is claimed.
func TestSendersSideBySideNeverSendOneActionConcurrently(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	const total = 200
	for i := range total {
		paid(t, s.Pool, fmt.Sprintf("in_%03d", i), "sub_1")
	}
	rcv := newReceiver(t, func(key string, n int) int {
		var i int
		_, _ = fmt.Sscanf(key[strings.LastIndex(key, "in_"):], "in_%03d", &i)
		switch {
		case n == 1 && i%7 == 0:
			return 0 // times out: ambiguous
		case n == 1 && i%5 == 0:
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Three senders and small batches, so claims collide often.
	for _, id := range []string{"a", "b", "c"} {
		snd := newSender(t, s.Pool, rcv.url, func(c *effects.Config) {
			c.SenderID, c.BatchSize, c.LeaseMargin, c.PollInterval = id, 2, 50*time.Millisecond, time.Millisecond
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, snd.Run(ctx))
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM action WHERE status = 'sent'`).Scan(&n))
		return n == total
	}, 60*time.Second, 20*time.Millisecond)
	cancel()
	wg.Wait()

	// When hookyard recorded each action sent, by the database's clock
	// (the test shares the machine's clock with Postgres).
	sentAt := map[string]time.Time{}
	rows, err := s.Pool.Query(context.Background(), `SELECT provider, source_account, environment, subject_id, kind, done_at FROM action`)
	require.NoError(t, err)
	for rows.Next() {
		var k action.Key
		var done time.Time
		require.NoError(t, rows.Scan(&k.Provider, &k.SourceAccount, &k.Environment, &k.SubjectID, &k.Kind, &done))
		sentAt[k.String()] = done
	}
	require.NoError(t, rows.Err())
	for _, r := range rcv.sim.Requests() {
		require.False(t, r.At.After(sentAt[r.Key]), "%s arrived again after it was recorded sent", r.Key)
	}
	require.Equal(t, 1, rcv.sim.MaxInFlight(), "one action was sent by two senders at once")
	require.Len(t, rcv.sim.Completed(), total, "every receipt was produced")
	perKey := rcv.keys()
	require.Len(t, perKey, total)
	for key, n := range perKey {
		var i int
		_, _ = fmt.Sscanf(key[strings.LastIndex(key, "in_"):], "in_%03d", &i)
		want := 1
		if i%7 == 0 || i%5 == 0 {
			want = 2
		}
		// More only when an answer came after the request's deadline (a
		// loaded machine), and then under the same key.
		require.GreaterOrEqual(t, n, want, "requests of %s", key)
	}
}
