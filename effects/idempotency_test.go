package effects_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/receiptsim"
	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/action"
)

// Invariant 12: every attempt of a receipt POSTs byte-identical bodies, so
// a standard server replays its stored answer to a retry instead of
// refusing the reused key with 422. Here the first attempt is delivered and
// processed, but its answer comes after the sender gave up (ambiguous); the
// retry must get the stored 2xx and the receipt be sent. The attempt number
// travels in the Hookyard-Attempt header. Fails if the body changes between
// attempts (an attempt counter in it), which turns a delivered receipt dead.
func TestEveryAttemptOfAReceiptSendsByteIdenticalBodies(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_same_body", "sub_1")
	sim := receiptsim.New(func(ctx context.Context, r receiptsim.Request, _ http.Header) int {
		if r.N == 1 {
			<-ctx.Done() // the work completes after the client gave up
		}
		return http.StatusOK
	})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	snd := newSender(t, s.Pool, srv.URL, nil)

	_, err := snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, action.StatusAmbiguous, show(t, s.Pool, k).Status)
	require.Eventually(t, func() bool { _, ok := sim.Completed()[k.String()]; return ok }, 10*time.Second, 10*time.Millisecond,
		"the first attempt's work completes")

	sendUntil(t, snd, s.Pool, k, action.StatusSent)
	reqs := sim.Requests()
	require.Len(t, reqs, 2)
	require.Equal(t, string(reqs[0].Body), string(reqs[1].Body), "the retry's body differs from the first attempt's")
	require.True(t, reqs[1].Replayed, "the retry got the stored answer")
	require.Equal(t, []string{"1", "2"}, []string{reqs[0].Attempt, reqs[1].Attempt})
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(reqs[0].Body, &doc))
	require.NotContains(t, doc, "attempt", "nothing that changes between attempts belongs in the body")
	require.Equal(t, 2, show(t, s.Pool, k).Attempts)
}

// Invariant 12: a 409 says the key's first request is still being
// processed (draft-ietf-httpapi-idempotency-key-header, section 2.6;
// Stripe's idempotency_key_in_use), not how it will end. Here the first
// attempt times out while the server still works on it, the retry is
// answered 409, and then the server's work fails and keeps nothing: the
// receipt must still be produced by a later attempt under the same key.
// Fails if a 409 is recorded sent, which leaves the receipt never produced.
func TestInProgressConflictIsRetriedWithTheSameKeyNotRecordedSent(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := paid(t, s.Pool, "in_conflict", "sub_1")
	release, stop := make(chan int), make(chan struct{})
	sim := receiptsim.New(func(_ context.Context, r receiptsim.Request, _ http.Header) int {
		if r.N == 1 {
			select { // still working after the client gave up
			case code := <-release:
				return code
			case <-stop:
				return http.StatusServiceUnavailable
			}
		}
		return http.StatusOK
	})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(stop) }) // before srv.Close, which waits for the handler
	snd := newSender(t, s.Pool, srv.URL, nil)

	_, err := snd.SendDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, action.StatusAmbiguous, show(t, s.Pool, k).Status)
	for show(t, s.Pool, k).Attempts < 2 {
		_, err := snd.SendDue(context.Background())
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
	}
	require.Equal(t, http.StatusConflict, sim.Requests()[1].Code)
	a := show(t, s.Pool, k)
	require.Equal(t, action.StatusAmbiguous, a.Status, "a 409 was taken for sent")
	require.Contains(t, a.LastError, "409")
	require.NotNil(t, a.NextAttemptAt)

	release <- http.StatusInternalServerError // the first attempt's work fails
	require.Eventually(t, func() bool { return sim.Requests()[0].Code != 0 }, 10*time.Second, 5*time.Millisecond)
	sendUntil(t, snd, s.Pool, k, action.StatusSent)
	require.Contains(t, sim.Completed(), k.String(), "the receipt was never produced")
	require.Equal(t, map[string]int{k.String(): 3}, sim.Keys(), "one key for every attempt")
}
