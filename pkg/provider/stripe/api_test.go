package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// setup starts a simulator behind an httptest.Server and a client for it.
func setup(t *testing.T, cfg stripe.APIConfig) (*stripesim.Sim, *stripe.Client) {
	t.Helper()
	sim := stripesim.New(stripesim.Config{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	cfg.BaseURL = srv.URL
	cfg.APIKey = stripesim.DevAPIKey
	return sim, stripe.NewClient(cfg, nil)
}

func TestGetOK(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{Keys: map[string]string{"sk_test_123": "acct_platform"}})
	sim.Connect("acct_platform", "acct_1")
	sim.PutFor("acct_1", stripesim.Subscription{ID: "sub_1", Customer: "cus_1", Status: "active"})
	sim.PutFor("acct_platform", stripesim.Subscription{ID: "sub_1", Customer: "cus_1", Status: "active"})
	var mu sync.Mutex
	var hdr http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hdr = r.Header.Clone()
		mu.Unlock()
		sim.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: "sk_test_123"}, nil)

	body, err := c.Get(t.Context(), "acct_1", "subscription", "sub_1")
	require.NoError(t, err)
	var sub stripesim.Subscription
	require.NoError(t, json.Unmarshal(body, &sub))
	require.Equal(t, "sub_1", sub.ID)
	require.Equal(t, "subscription", sub.Object)
	require.Equal(t, "active", sub.Status)
	require.Len(t, sub.Items.Data, 1)
	mu.Lock()
	require.Equal(t, "Bearer sk_test_123", hdr.Get("Authorization"))
	require.Equal(t, "acct_1", hdr.Get("Stripe-Account"))
	mu.Unlock()

	_, err = c.Get(t.Context(), "", "subscription", "sub_1")
	require.NoError(t, err)
	mu.Lock()
	require.Empty(t, hdr.Values("Stripe-Account"))
	mu.Unlock()
	require.EqualValues(t, 2, c.Calls())
	require.Equal(t, "closed", c.BreakerState())
}

func TestUnsupported(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{})
	_, err := c.Get(t.Context(), "", "coupon", "co_1") // not among the fetched objects
	require.ErrorIs(t, err, stripe.ErrUnsupported)
	_, _, _, err = c.List(t.Context(), "", "coupon", "", 10)
	require.ErrorIs(t, err, stripe.ErrUnsupported)
	require.Zero(t, sim.APICalls())
	require.Zero(t, c.Calls())
}

func TestNotFoundDoesNotTrip(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{BreakerFailures: 2})
	for i := range 20 {
		_, err := c.Get(t.Context(), "", "subscription", fmt.Sprintf("sub_missing_%d", i))
		require.ErrorIs(t, err, stripe.ErrNotFound)
		require.ErrorContains(t, err, "resource_missing")
	}
	require.Equal(t, "closed", c.BreakerState())
	require.EqualValues(t, 20, sim.APICalls())
}

func TestUnauthorizedDoesNotTrip(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{BreakerFailures: 2})
	for _, status := range []int{401, 403, 401, 403} {
		sim.SetFailure(status)
		_, err := c.Get(t.Context(), "", "subscription", "sub_1")
		require.ErrorIs(t, err, stripe.ErrUnauthorized)
	}
	require.Equal(t, "closed", c.BreakerState())
}

func TestServerErrorsOpenBreaker(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{BreakerFailures: 3, BreakerOpenFor: 100 * time.Millisecond})
	sim.Put(stripesim.Subscription{ID: "sub_1"})
	sim.SetFailure(http.StatusInternalServerError)
	for range 3 {
		_, err := c.Get(t.Context(), "", "subscription", "sub_1")
		require.ErrorIs(t, err, stripe.ErrServer)
	}
	require.Equal(t, "open", c.BreakerState())
	for range 5 {
		_, err := c.Get(t.Context(), "", "subscription", "sub_1")
		require.ErrorIs(t, err, stripe.ErrUnavailable)
	}
	require.EqualValues(t, 3, sim.APICalls(), "an open breaker sends nothing")
	require.EqualValues(t, 3, c.Calls())

	// Stripe recovers: after BreakerOpenFor one trial call closes the breaker.
	sim.SetFailure(0)
	require.Eventually(t, func() bool { return c.BreakerState() == "half-open" }, 2*time.Second, 10*time.Millisecond)
	_, err := c.Get(t.Context(), "", "subscription", "sub_1")
	require.NoError(t, err)
	require.Equal(t, "closed", c.BreakerState())
	require.EqualValues(t, 4, sim.APICalls())
}

func TestRateLimited(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{})
	sim.SetFailure(http.StatusTooManyRequests)
	_, err := c.Get(t.Context(), "", "subscription", "sub_1")
	require.ErrorIs(t, err, stripe.ErrRateLimited)
	require.NotErrorIs(t, err, stripe.ErrServer)
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{Timeout: 50 * time.Millisecond, BreakerFailures: 2})
	sim.Put(stripesim.Subscription{ID: "sub_1"})
	sim.SetLatency(time.Second)
	start := time.Now()
	_, err := c.Get(t.Context(), "", "subscription", "sub_1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 900*time.Millisecond)
	// Timeouts count against the breaker.
	_, err = c.Get(t.Context(), "", "subscription", "sub_1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, "open", c.BreakerState())
}

func TestCallerCancelDoesNotTrip(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{BreakerFailures: 1})
	sim.SetLatency(time.Second)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err := c.Get(ctx, "", "subscription", "sub_1")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, "closed", c.BreakerState())
}

func TestListPagination(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{})
	var want []string
	for i := range 25 {
		id := fmt.Sprintf("sub_%03d", i)
		want = append([]string{id}, want...) // Stripe lists newest first
		sim.Put(stripesim.Subscription{ID: id, Status: "active"})
	}
	var got []string
	after, pages := "", 0
	for {
		ids, _, more, err := c.List(t.Context(), "", "subscription", after, 10)
		require.NoError(t, err)
		got = append(got, ids...)
		pages++
		if !more {
			break
		}
		after = ids[len(ids)-1]
	}
	require.Equal(t, want, got)
	require.Equal(t, 3, pages)

	ids, _, more, err := c.List(t.Context(), "", "subscription", "sub_000", 10)
	require.NoError(t, err)
	require.Empty(t, ids)
	require.False(t, more)
}

func TestRateLimiterWaits(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{RatePerSecond: 20, Burst: 1})
	sim.Put(stripesim.Subscription{ID: "sub_1"})
	start := time.Now()
	for range 4 {
		_, err := c.Get(t.Context(), "", "subscription", "sub_1")
		require.NoError(t, err)
	}
	require.GreaterOrEqual(t, time.Since(start), 140*time.Millisecond)
}

func TestWithDefaults(t *testing.T) {
	t.Parallel()
	cfg := stripe.APIConfig{}.WithDefaults()
	require.Equal(t, stripe.BaseURLDefault, cfg.BaseURL)
	require.Equal(t, stripe.TimeoutDefault, cfg.Timeout)
	require.Equal(t, stripe.RatePerSecondDefault, cfg.RatePerSecond)
	require.Equal(t, stripe.BurstDefault, cfg.Burst)
	require.Equal(t, stripe.BreakerFailuresDefault, cfg.BreakerFailures)
	require.Equal(t, stripe.BreakerOpenForDefault, cfg.BreakerOpenFor)
	require.NotNil(t, cfg.HTTPClient)
	tr, ok := cfg.HTTPClient.Transport.(*http.Transport)
	require.True(t, ok)
	require.GreaterOrEqual(t, tr.MaxIdleConnsPerHost, 16, "partition workers share the API connection pool")
}

// Stripe's list leaves canceled subscriptions out unless status=all; the
// lister asks for all of them, or a cancellation whose webhook was lost is
// never found (https://docs.stripe.com/api/subscriptions/list).
func TestListAsksForEverySubscriptionStatus(t *testing.T) {
	t.Parallel()
	sim, c := setup(t, stripe.APIConfig{})
	sim.Put(stripesim.Subscription{ID: "sub_active", Status: "active", Created: 100})
	sim.Put(stripesim.Subscription{ID: "sub_canceled", Status: "canceled", Created: 200})
	ids, statuses, more, err := c.List(t.Context(), "", "subscription", "", 10)
	require.NoError(t, err)
	require.False(t, more)
	require.Equal(t, []string{"sub_canceled", "sub_active"}, ids)
	require.Equal(t, []string{"canceled", "active"}, statuses)
}

// An object whose livemode is not the credentials' mode (a live key on a test
// endpoint, or the reverse) is refused, by Get and by List, and says nothing
// about Stripe's health: the breaker stays closed.
func TestObjectOfTheOtherModeIsRefused(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{Keys: map[string]string{"sk_live_acct_a": "acct_a", "sk_test_acct_a": "acct_a"}})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	sim.PutFor("acct_a", stripesim.Subscription{ID: "sub_live", Status: "active", Livemode: true})
	sim.PutFor("acct_a", stripesim.Subscription{ID: "sub_test", Status: "active"})

	testMode := stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: "sk_live_acct_a", BreakerFailures: 2}, nil)
	require.False(t, testMode.Live())
	for range 3 {
		_, err := testMode.Get(t.Context(), "", "subscription", "sub_live")
		require.ErrorIs(t, err, stripe.ErrLivemodeMismatch)
		require.ErrorContains(t, err, "livemode")
		_, _, _, err = testMode.List(t.Context(), "", "subscription", "", 10)
		require.ErrorIs(t, err, stripe.ErrLivemodeMismatch)
	}
	require.Equal(t, "closed", testMode.BreakerState())

	liveMode := stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: "sk_test_acct_a", Live: true}, nil)
	_, err := liveMode.Get(t.Context(), "", "subscription", "sub_test")
	require.ErrorIs(t, err, stripe.ErrLivemodeMismatch)

	right := stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: "sk_live_acct_a", Live: true}, nil)
	body, err := right.Get(t.Context(), "", "subscription", "sub_live")
	require.NoError(t, err)
	require.Contains(t, string(body), `"livemode":true`)
	ids, _, _, err := right.List(t.Context(), "", "subscription", "", 10)
	require.NoError(t, err)
	require.Equal(t, []string{"sub_live"}, ids)
}
