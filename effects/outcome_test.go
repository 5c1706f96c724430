package effects_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/internal/receiptsim"
	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
)

// The receiving server's answer decides the outcome: only a 2xx is sent; a
// 409 for the same key (in progress) is ambiguous and retried with that
// key; 408, 429 and 5xx are failed and retried; 422, any other 4xx, a
// redirect, or a 409 naming another key is dead (kept for an operator).
// Fails if a permanent refusal is retried forever, if a retryable answer
// kills the receipt, or if "in progress" is taken for sent.
func TestReceiptAnswersDecideSentRetriedOrDead(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	cases := map[string]struct {
		code   int
		header string
		want   string
	}{
		"in_200": {200, "", action.StatusSent}, "in_201": {201, "", action.StatusSent}, "in_204": {204, "", action.StatusSent},
		"in_409": {409, "", action.StatusAmbiguous}, "in_409same": {409, "same", action.StatusAmbiguous},
		"in_409other": {409, "hookyard:other", action.StatusDead},
		"in_400":      {400, "", action.StatusDead}, "in_401": {401, "", action.StatusDead}, "in_404": {404, "", action.StatusDead},
		"in_422": {422, "", action.StatusDead}, "in_302": {302, "", action.StatusDead},
		"in_408": {408, "", action.StatusFailed}, "in_429": {429, "", action.StatusFailed},
		"in_500": {500, "", action.StatusFailed}, "in_503": {503, "", action.StatusFailed},
	}
	for inv := range cases {
		paid(t, s.Pool, inv, "sub_1")
	}
	srv := httptest.NewServer(receiptsim.New(func(_ context.Context, r receiptsim.Request, h http.Header) int {
		c := cases[r.Key[strings.Index(r.Key, "in_"):strings.LastIndex(r.Key, ":")]]
		switch c.header {
		case "same":
			h.Set("Idempotency-Key", r.Key)
		case "":
		default:
			h.Set("Idempotency-Key", c.header)
		}
		if c.code == 302 {
			h.Set("Location", "/elsewhere")
		}
		return c.code
	}))
	t.Cleanup(srv.Close)
	snd := newSender(t, s.Pool, srv.URL, func(c *effects.Config) { c.BatchSize = 100; c.BackoffBase, c.BackoffMax = time.Hour, time.Hour })
	n, err := snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, len(cases), n)
	for inv, c := range cases {
		a := show(t, s.Pool, paidKey(inv))
		require.Equal(t, c.want, a.Status, "%s answered %d", inv, c.code)
		require.Equal(t, 1, a.Attempts)
		switch c.want {
		case action.StatusSent:
			require.Empty(t, a.LastError)
		case action.StatusFailed, action.StatusAmbiguous:
			require.Contains(t, a.LastError, "HTTP ")
			require.NotNil(t, a.NextAttemptAt)
			require.Greater(t, time.Until(*a.NextAttemptAt), 20*time.Minute, "retry after the backoff")
		case action.StatusDead:
			require.Contains(t, a.LastError, "HTTP ")
			require.NotNil(t, a.DoneAt)
		}
	}
	// Nothing more is due: sent and dead are final, failed waits.
	n, err = snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

func paidKey(invoice string) action.Key {
	return action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: invoice, Kind: action.KindReceipt}
}

// A refused connection means the request never left: failed (retried), not
// ambiguous; after MaxAttempts the receipt is dead with the last error, and
// a replay gives it a fresh budget under the same key. Fails if attempts
// are unbounded or a replay is refused or changes the key.
func TestUnreachableReceiptServerRetriesThenDiesAndReplaySendsTheSameKey(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_down", "sub_1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now
	snd := newSender(t, s.Pool, url, func(c *effects.Config) { c.MaxAttempts = 3 })
	sendUntil(t, snd, s.Pool, k, action.StatusDead)
	a := show(t, s.Pool, k)
	require.Equal(t, 3, a.Attempts)
	require.Contains(t, a.LastError, "not sent")

	dead, err := action.List(context.Background(), s.Pool, action.Filter{})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, k.String(), dead[0].IdempotencyKey)

	rcv := newReceiver(t, func(string, int) int { return http.StatusOK })
	snd = newSender(t, s.Pool, rcv.url, nil)
	require.NoError(t, action.ReplayDead(context.Background(), s.Pool, k))
	sendUntil(t, snd, s.Pool, k, action.StatusSent)
	require.Equal(t, map[string]int{k.String(): 1}, rcv.keys())
	require.Equal(t, 4, rcv.requests()[0].attempt)

	// A sent action is never replayed.
	err = action.ReplayDead(context.Background(), s.Pool, k)
	require.ErrorIs(t, err, action.ErrNotDead)
	require.ErrorIs(t, action.ReplayDead(context.Background(), s.Pool, paidKey("in_none")), action.ErrNotFound)
}

// With no receipt URL the sender claims nothing: receipts stay pending and
// say why. Fails if an unconfigured sender takes (and so delays or kills)
// receipts.
func TestNoReceiptURLLeavesReceiptsPending(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_nourl", "sub_1")
	snd, err := effects.New(s.Pool, pipelinetest.Logger(t), effects.Config{})
	require.NoError(t, err)
	n, err := snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	require.NoError(t, snd.Run(ctx))
	a := show(t, s.Pool, k)
	require.Equal(t, action.StatusPending, a.Status)
	require.Zero(t, a.Attempts)
}

// A replay gives an action a fresh budget and a fresh backoff: its first
// failure after the replay waits about BackoffBase, not the delay its
// pre-replay attempt count would give (here the one-hour cap). Fails if
// the backoff counts the attempts before the replay, which leaves a
// replayed receipt an hour behind after one more failure.
func TestReplayedReceiptIsRetriedAfterTheBaseDelayNotItsOldBackoff(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_replayed", "sub_1")
	// Twelve attempts used up before the replay.
	_, err := s.Pool.Exec(context.Background(), `UPDATE action SET status = 'dead', attempts = 12, done_at = now(),
    last_error = 'attempt 12: HTTP 503' WHERE subject_id = 'in_replayed'`)
	require.NoError(t, err)
	require.NoError(t, action.ReplayDead(context.Background(), s.Pool, k))

	rcv := newReceiver(t, func(string, int) int { return http.StatusServiceUnavailable })
	snd := newSender(t, s.Pool, rcv.url, func(c *effects.Config) { c.BackoffBase, c.BackoffMax = time.Minute, time.Hour })
	n, err := snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n, "a replayed action is due at once")
	a := show(t, s.Pool, k)
	require.Equal(t, action.StatusFailed, a.Status)
	require.Equal(t, 13, a.Attempts, "attempts keep counting across the replay")
	require.NotNil(t, a.NextAttemptAt)
	require.Less(t, time.Until(*a.NextAttemptAt), 2*time.Minute, "the first retry after a replay waits the base delay")
	require.Equal(t, "13", rcv.sim.Requests()[0].Attempt)
}
