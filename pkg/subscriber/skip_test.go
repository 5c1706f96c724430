package subscriber_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/pkg/subscriber"
)

// rejectFirst answers 400 to every attempt of the first change it sees
// (the subscriber cannot take it, ever) and 200 to the others, and keeps
// the acknowledged changes in order.
type rejectFirst struct {
	mu    sync.Mutex
	first string
	tries int
	acked []int64
}

func (s *rejectFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c, err := message.DecodeChange(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := r.Header.Get(subscriber.IDHeader)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == "" {
		s.first = id
	}
	if id == s.first {
		s.tries++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.acked = append(s.acked, *c.FetchSeq)
	w.WriteHeader(http.StatusOK)
}

// A change the subscriber rejects for good goes dead and blocks its
// resource's later changes; the operator skips it, and the later changes
// are then delivered, in their order, while the skipped one is never sent
// again. Fails if a skipped delivery still blocks its stream, is sent, or
// if the changes behind it are delivered out of order.
func TestSkippedDeadChangeLetsTheNextChangesOfItsResourceGoOutInOrder(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	srvState := &rejectFirst{}
	srv := httptest.NewServer(srvState)
	t.Cleanup(srv.Close)
	subs := subscriber.Subscribers{{Name: "billing", URL: srv.URL, SecretEnv: "BILLING_SECRET", Secret: newSecret(t), Types: []string{"subscription"}}}
	feeder, err := subscriber.NewFeeder(p.Pool, p.Log, subscriber.FeederConfig{Brokers: p.Kafka.Brokers, Topic: p.Kafka.ChangesTopic,
		Group: "subscribers-" + p.Schema, Subscribers: subs})
	require.NoError(t, err)
	snd, err := effects.New(p.Pool, p.Log, effects.Config{Subscribers: subs, Timeout: time.Second,
		PollInterval: 10 * time.Millisecond, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond, SenderID: "s"})
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	for _, f := range []func(context.Context) error{feeder.Run, snd.Run} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("run: %v", err)
			}
		}()
	}
	kind := subs[0].Kind()
	count := func(status string) int {
		var n int
		require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM action WHERE kind = $1 AND status = $2`, kind, status).Scan(&n))
		return n
	}

	// The first change, then two more of the same resource.
	for i, status := range []string{"trialing", "active", "past_due"} {
		s := stripesim.Subscription{ID: "sub_skip", Customer: "cus_skip", Status: status, CurrentPeriodEnd: time.Now().Add(720 * time.Hour).Unix()}
		p.Sim.Put(s)
		_, code, err := p.Sim.Send(ctx, "customer.subscription.updated", s)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
		p.WaitIdle()
		if i == 0 {
			p.Eventually(func() bool { return count(action.StatusDead) == 1 }, "the first change dead (400)")
		}
	}
	p.Eventually(func() bool { return count(action.StatusPending) == 2 }, "the later changes recorded")
	// The ordered claim's own tests prove the block; here the later
	// changes are still pending while the sender polls.
	require.Equal(t, 2, count(action.StatusPending), "blocked behind the dead change")
	srvState.mu.Lock()
	require.Empty(t, srvState.acked)
	tries := srvState.tries
	srvState.mu.Unlock()

	dead, err := action.List(ctx, p.Pool, action.Filter{Kind: kind})
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, srvState.first, dead[0].IdempotencyKey)
	require.NoError(t, action.Skip(ctx, p.Pool, dead[0].Key, "the subscriber cannot take it"))

	p.Eventually(func() bool { return count(action.StatusSent) == 2 }, "the later changes delivered")
	srvState.mu.Lock()
	defer srvState.mu.Unlock()
	require.Len(t, srvState.acked, 2)
	require.Less(t, srvState.acked[0], srvState.acked[1], "in their order: %v", srvState.acked)
	require.Equal(t, tries, srvState.tries, "the skipped change is never sent again")
	require.Equal(t, 1, count(action.StatusSkipped))
}
