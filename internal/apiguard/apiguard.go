// Package apiguard puts a token bucket and a circuit breaker in front of a
// provider API's calls: one Guard per set of credentials, because providers
// limit per account or token. It owns nothing but the waiting and the
// failing fast; what counts as the provider being unhealthy is the caller's
// to say.
package apiguard

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sony/gobreaker/v2"
	"golang.org/x/time/rate"
)

// Defaults of Config.
const (
	BreakerFailuresDefault = uint32(5)
	BreakerOpenForDefault  = 10 * time.Second
)

// Sentinel errors; no request was sent.
var (
	// ErrUnavailable: the breaker is open (or half-open and busy).
	ErrUnavailable = errors.New("provider api unavailable (breaker open)")
	// ErrLimited: the caller's context ended while waiting for a token.
	ErrLimited = errors.New("refused by the local rate limiter")
)

// Config configures a Guard.
type Config struct {
	// Name labels the breaker in logs.
	Name string
	// RatePerSecond is the steady rate of calls. Required.
	RatePerSecond float64
	// Burst is the bucket's size. Defaults to 1.
	Burst int
	// BreakerFailures opens the breaker after that many unhealthy calls in a
	// row. Defaults to BreakerFailuresDefault.
	BreakerFailures uint32
	// BreakerOpenFor is how long it stays open. Defaults to
	// BreakerOpenForDefault.
	BreakerOpenFor time.Duration
	// Healthy says whether a call's error says the provider is healthy (a
	// 404 does, a 5xx or 429 does not). Defaults to err == nil.
	Healthy func(error) bool
}

// Guard is safe for concurrent use.
type Guard struct {
	limiter *rate.Limiter
	breaker *gobreaker.CircuitBreaker[struct{}]
}

// New returns a Guard for cfg.
func New(cfg Config) *Guard {
	cfg.Burst = max(cfg.Burst, 1)
	cfg.BreakerFailures = cmp.Or(cfg.BreakerFailures, BreakerFailuresDefault)
	cfg.BreakerOpenFor = cmp.Or(cfg.BreakerOpenFor, BreakerOpenForDefault)
	healthy := cfg.Healthy
	if healthy == nil {
		healthy = func(err error) bool { return err == nil }
	}
	return &Guard{
		limiter: rate.NewLimiter(rate.Limit(cfg.RatePerSecond), cfg.Burst),
		breaker: gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
			Name: cfg.Name, Timeout: cfg.BreakerOpenFor,
			ReadyToTrip:  func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= cfg.BreakerFailures },
			IsSuccessful: healthy,
			IsExcluded:   func(err error) bool { return errors.Is(err, context.Canceled) },
		}),
	}
}

// Do waits for a token and runs call inside the breaker.
func (g *Guard) Do(ctx context.Context, what string, call func() error) error {
	if g.breaker.State() == gobreaker.StateOpen {
		return fmt.Errorf("%w: %s", ErrUnavailable, what)
	}
	if err := g.limiter.Wait(ctx); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrLimited, what, err)
	}
	_, err := g.breaker.Execute(func() (struct{}, error) { return struct{}{}, call() })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
	}
	return err
}
