// Package stripeapi reads the current state of Stripe resources. The webhook
// processor treats Stripe events as hints and fetches the resource they name
// with this client before it projects anything.
//
// Every call waits for a token bucket (Config.RatePerSecond, Config.Burst)
// and runs inside a circuit breaker: 5xx answers, 429s, timeouts and network
// errors count as failures, and after Config.BreakerFailures of them in a row
// calls fail fast with ErrUnavailable for Config.BreakerOpenFor. Answers that
// say something about the request rather than about Stripe's health (404,
// 401, 403, other 4xx) never trip the breaker.
package stripeapi
