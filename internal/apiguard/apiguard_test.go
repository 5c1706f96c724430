package apiguard_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/apiguard"
)

var (
	errServer   = errors.New("503 from the provider")
	errNotFound = errors.New("404 from the provider")
)

// After BreakerFailures unhealthy calls in a row the breaker opens: calls
// fail fast with ErrUnavailable and never reach the provider, until
// BreakerOpenFor has passed and one trial call closes it again. Fails if the
// breaker does not open (an outage would be hammered) or never closes.
func TestBreakerOpensAfterConsecutiveFailuresAndClosesAfterATrial(t *testing.T) {
	t.Parallel()
	g := apiguard.New(apiguard.Config{Name: "test", RatePerSecond: 1000, Burst: 100, BreakerFailures: 3, BreakerOpenFor: 200 * time.Millisecond})
	ctx := context.Background()
	var calls atomic.Int32
	failing := func() error { calls.Add(1); return errServer }

	for range 3 {
		err := g.Do(ctx, "get", failing)
		require.ErrorIs(t, err, errServer, "the call's own error is returned")
		require.NotErrorIs(t, err, apiguard.ErrUnavailable)
	}
	err := g.Do(ctx, "get", failing)
	require.ErrorIs(t, err, apiguard.ErrUnavailable)
	require.ErrorContains(t, err, "get")
	require.Equal(t, int32(3), calls.Load(), "an open breaker sends nothing")

	time.Sleep(300 * time.Millisecond)
	require.NoError(t, g.Do(ctx, "get", func() error { calls.Add(1); return nil }), "half-open: one trial call goes through")
	require.Equal(t, int32(4), calls.Load())
	require.NoError(t, g.Do(ctx, "get", func() error { return nil }), "closed again")
}

// What counts as unhealthy is the caller's to say: errors Healthy accepts
// (a 404 says the provider works) and canceled calls never open the
// breaker. Fails if a run of 404s or cancellations cuts a healthy provider
// off.
func TestHealthyErrorsAndCancellationsDoNotOpenTheBreaker(t *testing.T) {
	t.Parallel()
	g := apiguard.New(apiguard.Config{RatePerSecond: 1000, Burst: 100, BreakerFailures: 2,
		Healthy: func(err error) bool { return err == nil || errors.Is(err, errNotFound) }})
	ctx := context.Background()
	for range 5 {
		require.ErrorIs(t, g.Do(ctx, "get", func() error { return errNotFound }), errNotFound)
		require.ErrorIs(t, g.Do(ctx, "get", func() error { return context.Canceled }), context.Canceled)
	}
	var called bool
	require.NoError(t, g.Do(ctx, "get", func() error { called = true; return nil }))
	require.True(t, called)
}

// The token bucket holds calls to the configured rate: once the burst is
// spent, a call whose context ends before its token comes is refused with
// ErrLimited and never sent. Fails if the limiter lets calls through at
// will or sends a call after its caller gave up.
func TestRateLimiterRefusesWhenTheCallerCannotWaitForAToken(t *testing.T) {
	t.Parallel()
	g := apiguard.New(apiguard.Config{RatePerSecond: 1, Burst: 2})
	ctx := context.Background()
	var calls atomic.Int32
	call := func() error { calls.Add(1); return nil }
	require.NoError(t, g.Do(ctx, "list", call))
	require.NoError(t, g.Do(ctx, "list", call))

	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := g.Do(short, "list", call)
	require.ErrorIs(t, err, apiguard.ErrLimited)
	require.Equal(t, int32(2), calls.Load(), "a refused call is not sent")

	// The bucket refills at the rate: a caller that can wait gets its token.
	start := time.Now()
	require.NoError(t, g.Do(ctx, "list", call))
	require.Equal(t, int32(3), calls.Load())
	require.Greater(t, time.Since(start), 200*time.Millisecond, "the third token comes at 1/s, not at once")
}
