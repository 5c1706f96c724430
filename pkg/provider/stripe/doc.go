// Package stripe is everything hookyard knows about Stripe: it verifies
// deliveries with stripe-go's webhook package and reads their identity
// (Verifier), says what each event asks of the processor (Interpret), reads
// current state (Fetcher) and lists subscriptions and events for the
// reconciler (Connect) with its API client, Client. It never decides account
// or environment from the body: it only refuses an event whose account or
// livemode contradicts the endpoint; and it never writes hookyard's state,
// which is the processor's.
//
// The API client reads the current state of Stripe resources. The webhook
// processor treats Stripe events as hints and fetches the resource they name
// with this client before it projects anything; the reconciler lists
// subscriptions with it (status=all, so canceled ones are not left out).
//
// A Client holds one set of credentials: an API key and the mode (test or
// live) of the data that key reads. Accounts builds one Client per distinct
// set of credentials from the config's Stripe endpoints (each endpoint's
// api_key, else STRIPE_API_KEY, and its stripe_account for Connect) and finds
// the one of a source account and environment, so account B's resources are
// never read with account A's key. Every object a Client returns must carry
// the livemode of its credentials (ErrLivemodeMismatch otherwise).
//
// Every call waits for the Client's token bucket (APIConfig.RatePerSecond,
// APIConfig.Burst) and runs inside its circuit breaker: 5xx answers, 429s,
// timeouts and network errors count as failures, and after
// APIConfig.BreakerFailures of them in a row calls fail fast with
// ErrUnavailable for APIConfig.BreakerOpenFor. Stripe's rate limits are per
// account, so the limiter and the breaker are per set of credentials too:
// one account's outage or throttling does not stop the others. Answers that
// say something about the request rather than about Stripe's health (404,
// 401, 403, other 4xx, an object of the other mode) never trip the breaker.
package stripe
