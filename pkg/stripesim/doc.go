// Package stripesim is an in-process, Stripe-compatible simulator for
// `hookyard dev`, tests and benchmarks. It serves the read API the processor
// uses (GET /v1/subscriptions/{id}, GET /v1/subscriptions), sends signed
// webhook events to a receiver, and offers control endpoints under /sim/ so
// people trying the product can create, cancel and pay for subscriptions
// with curl:
//
//	POST /sim/subscriptions               {"id","customer","status","cancel_at_period_end","current_period_end"}
//	POST /sim/subscriptions/{id}/cancel   {"at_period_end": bool}
//	POST /sim/invoices/{id}/pay           {"subscription","amount_paid"}
//	GET  /sim/stats                       {"api_calls": n}
//
// SetLatency and SetFailure shape the API's answers for timeout and outage
// tests.
package stripesim
