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
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/dbtest"
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
