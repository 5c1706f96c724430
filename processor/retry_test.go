package processor_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
	"github.com/hookyard/hookyard/reconciler"
)

// fastClock runs factor times faster than the wall clock from its start: a
// 30-minute provider incident passes in 3 s of a test at factor 600, while
// the processor's retry schedule, the retry window and the sweeper's "due"
// all read this clock.
type fastClock struct {
	start  time.Time
	factor int64
}

func newFastClock(factor int64) fastClock { return fastClock{start: time.Now(), factor: factor} }

func (c fastClock) Now() time.Time {
	return c.start.Add(time.Duration(int64(time.Since(c.start)) * c.factor))
}

// manualClock moves only when the test says so.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// The provider is down for a (simulated) 30 minutes while a cancellation
// hint arrives: with the default retry settings the hint is still being
// retried when the provider comes back, and is then applied without an
// operator. Tries the breaker refused (no request reached the provider) do
// not count as attempts. Fails with a fixed attempt budget (8 attempts die
// within minutes) or when breaker refusals spend attempts.
func TestCancellationHintDuringLongOutageIsAppliedAfterRecovery(t *testing.T) {
	t.Parallel()
	clk := newFastClock(600)
	// A breaker that stays open 2 s (20 simulated minutes): tries meet it
	// open, as they would in a real incident.
	var client *stripe.Client
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) {
		c.BackoffBase, c.BackoffMax, c.MaxAttempts = 0, 0, 0 // the defaults
		c.Now = clk.Now
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: stripe.Fetcher{Client: client}}
	}, NoProcessor: true})
	client = stripe.NewClient(stripe.APIConfig{BaseURL: p.SimServer.URL, APIKey: stripesim.DevAPIKey, RatePerSecond: 10000, Burst: 10000,
		BreakerOpenFor: 2 * time.Second, Timeout: 2 * time.Second}, p.Log)
	p.StartProcessor("p1", nil)
	r := pipelinetest.Resource("sub_long_outage")
	s := scSub(r.ID, "active")
	p.Sim.Put(s)
	scSend(t, p, "customer.subscription.created", s)
	p.WaitIdle()
	require.Equal(t, "active", scProjection(t, p, r).Status)

	p.Sim.SetFailure(http.StatusServiceUnavailable)
	outage := clk.Now()
	callsAtOutage := p.Sim.APICalls()
	s.Status, s.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(s)
	evID := scSend(t, p, "customer.subscription.deleted", s)
	k := scStripeKey(evID)

	// The open breaker refused some tries: those reached no provider. How
	// many tries fit in 30 simulated minutes depends on how fast this
	// machine runs the pipeline (each try goes through the outbox, Kafka
	// and the processor in real time), so the outage lasts until one has
	// met the open breaker, and at least 30 simulated minutes: far inside
	// the 72-hour retry window either way.
	refused := func() (n int) {
		for _, e := range scHistoryOf(scHistory(t, p, r), evID) {
			if strings.Contains(e.Detail, provider.ErrNotAttempted.Error()) {
				n++
			}
		}
		return n
	}
	p.Eventually(func() bool { return clk.Now().Sub(outage) >= 30*time.Minute && refused() > 0 },
		"30 simulated minutes pass and a try meets the open breaker")
	row := scInbox(t, p, k)
	// Retrying (waiting for its next try) or pending (re-enqueued for it):
	// either way alive, neither dead nor applied.
	require.Contains(t, []string{inbox.StatusRetrying, inbox.StatusPending}, row.Status, "the hint did not outlive the outage: %+v", row)
	require.GreaterOrEqual(t, row.Attempts, 1)
	require.LessOrEqual(t, int64(row.Attempts), p.Sim.APICalls()-callsAtOutage,
		"attempts were spent on tries that never reached the provider")
	require.Equal(t, "active", scProjection(t, p, r).Status)

	p.Sim.SetFailure(0)
	row = scWaitStatus(t, p, k, inbox.StatusProcessed)
	require.Equal(t, projection.Fetched, *row.Outcome)
	require.Equal(t, "canceled", scProjection(t, p, r).Status)
	d, code := p.Access(r.ID)
	require.Equal(t, http.StatusOK, code)
	require.False(t, d.Access)
}

// A hint that still fails when its retry window ends is dead, and its
// projection is marked needs_reconcile, so the reconciler's next round
// checks the resource and writes the provider's state. Fails if a dead hint
// leaves the projection looking settled.
func TestHintExhaustingRetryWindowMarksProjectionNeedsReconcile(t *testing.T) {
	t.Parallel()
	clk := newFastClock(600)
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) {
		c.BackoffBase, c.BackoffMax, c.MaxAttempts = 0, 0, 0
		c.RetryWindow = 10 * time.Minute
		c.Now = clk.Now
	}})
	ctx := context.Background()
	r := pipelinetest.Resource("sub_window")
	s := scSub(r.ID, "active")
	p.Sim.Put(s)
	scSend(t, p, "customer.subscription.created", s)
	p.WaitIdle()
	before := scProjection(t, p, r)
	require.False(t, before.NeedsReconcile)

	p.Sim.SetFailure(http.StatusInternalServerError)
	s.Status = "past_due"
	p.Sim.Put(s)
	start := clk.Now()
	evID := scSend(t, p, "customer.subscription.updated", s)
	row := scWaitStatus(t, p, scStripeKey(evID), inbox.StatusDead)
	require.GreaterOrEqual(t, clk.Now().Sub(start), 10*time.Minute, "dead before its window ended")
	require.NotNil(t, row.LastError)

	after := scProjection(t, p, r)
	require.Equal(t, "active", after.Status, "a provider error changed the projection")
	require.True(t, after.NeedsReconcile, "a dead hint left its projection looking settled")
	require.Equal(t, 1, scCount(t, p, `SELECT count(*) FROM projection WHERE needs_reconcile`))

	// The reconciler picks it up once the provider is back.
	p.Sim.SetFailure(0)
	// A round whose check met the still-open breaker is followed by the
	// next round, as the reconciler's own loop would.
	rec := reconciler.New(p.Pool, p.Log, reconciler.Config{FetchProviders: []string{provider.Stripe}, ParkedRecheck: 200 * time.Millisecond})
	var lastRound time.Time
	p.Eventually(func() bool {
		if pr := scProjection(t, p, r); pr.Status == "past_due" && !pr.NeedsReconcile {
			return true
		}
		if time.Since(lastRound) > 300*time.Millisecond {
			lastRound = time.Now()
			_, err := rec.RunOnce(ctx)
			require.NoError(t, err)
		}
		return false
	}, "the reconciler's check writes the provider's state")
}

// A replayed dead event gets a fresh attempt budget: it is retried again,
// not dead on its first failure. Fails if a replay keeps the attempts (and
// window) the event exhausted before.
func TestReplayedDeadEventStartsWithFreshAttemptBudget(t *testing.T) {
	t.Parallel()
	clk := &manualClock{now: time.Now()}
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) {
		c.MaxAttempts = 2
		c.BackoffBase, c.BackoffMax = time.Hour, time.Hour
		c.Now = clk.Now
	}})
	ctx := context.Background()
	s := scSub("sub_replay_budget", "active")
	p.Sim.Put(s)
	p.Sim.SetFailure(http.StatusInternalServerError)
	evID := scSend(t, p, "customer.subscription.updated", s)
	k := scStripeKey(evID)

	p.Eventually(func() bool {
		row, err := inbox.Get(ctx, p.Pool, k, false)
		return err == nil && row.Status == inbox.StatusRetrying
	}, "first failure parks the event")
	clk.Advance(2 * time.Hour)
	row := scWaitStatus(t, p, k, inbox.StatusDead)
	require.Equal(t, 2, row.Attempts)

	n, err := inbox.Replay(ctx, p.Pool, k)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	p.Eventually(func() bool {
		row, err = inbox.Get(ctx, p.Pool, k, false)
		return err == nil && row.Status != inbox.StatusPending
	}, "replayed event handled")
	require.Equal(t, inbox.StatusRetrying, row.Status, "the replay started with a spent budget: %+v", row)
	require.Equal(t, 1, row.Attempts)
}

// retryAfterError is a provider refusal that says when to come back.
type retryAfterError struct{ d time.Duration }

func (e retryAfterError) Error() string             { return "429 rate limited" }
func (e retryAfterError) RetryAfter() time.Duration { return e.d }

type refusingFetcher struct{ d time.Duration }

func (f refusingFetcher) Fetch(context.Context, message.Resource) (provider.Fetched, error) {
	return provider.Fetched{}, fmt.Errorf("fetch: %w", retryAfterError(f))
}

// A provider's 429 reached the provider: it counts as an attempt, and its
// Retry-After is honoured (the next attempt is not sooner). Fails if the
// retry ignores Retry-After and comes back after the short backoff.
func TestRateLimitedHintWaitsForRetryAfter(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) {
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: refusingFetcher{d: time.Hour}}
	}})
	sent := time.Now()
	evID := scSend(t, p, "customer.subscription.updated", scSub("sub_429", "active"))
	var row inbox.Row
	p.Eventually(func() bool {
		row = scInbox(t, p, scStripeKey(evID))
		return row.Status == inbox.StatusRetrying
	}, "the refused hint is parked")
	require.Equal(t, 1, row.Attempts, "a 429 reached the provider: it is an attempt")
	require.NotNil(t, row.NextAttemptAt)
	require.True(t, row.NextAttemptAt.After(sent.Add(59*time.Minute)), "next attempt %s ignores Retry-After", row.NextAttemptAt)
}
