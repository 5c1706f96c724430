package reconciler_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/reconciler"
)

// throttle stands in front of a simulator and answers 429 to chosen
// requests, as Stripe does when a rate limit is hit; it logs every request.
type throttle struct {
	next http.Handler
	mu   sync.Mutex
	n    int
	deny map[int]bool // 1-based request numbers answered 429
	log  []string
}

func (t *throttle) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.mu.Lock()
	t.n++
	n := t.n
	t.log = append(t.log, r.URL.RawQuery)
	deny := t.deny[n]
	t.mu.Unlock()
	if deny {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"type":"rate_limit_error","code":"rate_limit","message":"Too many requests"}}`))
		return
	}
	t.next.ServeHTTP(w, r)
}

func (t *throttle) requests() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.log...)
}

// A listing stopped by a 429 keeps its cursor and its error in
// reconcile_checkpoint and is not recorded complete; the next round resumes
// after the last page it walked, not from the start, and completes. Fails
// if an interrupted walk restarts from the beginning (the first page's
// subscriptions would be checked twice) or is recorded as complete.
func TestRoundStoppedByRateLimitResumesFromItsCheckpoint(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	for i := range 5 {
		p.Sim.Put(stripesim.Subscription{ID: fmt.Sprintf("sub_page_%d", i), Customer: "cus", Status: "active",
			Created: time.Now().Add(-time.Duration(i) * time.Minute).Unix()})
	}
	th := &throttle{next: p.Sim, deny: map[int]bool{2: true}}
	srv := httptest.NewServer(th)
	t.Cleanup(srv.Close)
	client := stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: stripesim.DevAPIKey, RatePerSecond: 1000, Burst: 1000}, p.Log)
	src := provider.Source{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test",
		ResourceType: "subscription", Lister: client}
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{PageSize: 2, Registerer: prometheus.NewRegistry(), Sources: []provider.Source{src}})

	rep, err := r.Round(ctx, reconciler.Filter{})
	require.ErrorIs(t, err, stripe.ErrRateLimited)
	require.EqualValues(t, 2, rep.Sources[0].Checks, "the first page was checked before the 429")
	require.False(t, rep.Sources[0].Listings[0].Complete)
	cp, err := reconciler.LoadCheckpoint(ctx, p.Pool, src.Name(), "subscriptions")
	require.NoError(t, err)
	require.Equal(t, "sub_page_1", cp.Cursor, "the cursor is the last id of the page walked")
	require.Nil(t, cp.LastCompleteAt, "an interrupted walk is never recorded complete")
	require.Contains(t, cp.LastError, "429")

	rep, err = r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.Equal(t, "sub_page_1", rep.Sources[0].Listings[0].ResumedAt)
	require.True(t, rep.Sources[0].Listings[0].Complete)
	require.EqualValues(t, 3, rep.Sources[0].Checks, "only the pages not walked before")
	reqs := th.requests()
	require.Contains(t, reqs[2], "starting_after=sub_page_1", "the resumed walk starts after the checkpoint")

	cp, err = reconciler.LoadCheckpoint(ctx, p.Pool, src.Name(), "subscriptions")
	require.NoError(t, err)
	require.Empty(t, cp.Cursor, "a complete walk resets the cursor")
	require.NotNil(t, cp.LastCompleteAt)
	require.Empty(t, cp.LastError)

}
