// Package stripesim is an in-process, Stripe-compatible simulator for
// `hookyard dev`, tests and benchmarks. It serves the read API the processor
// and the reconciler use (GET /v1/subscriptions/{id}, GET /v1/subscriptions,
// GET /v1/customers, GET /v1/invoices, GET /v1/events, and GET /v1/{customers,invoices,payment_intents,charges,
// prices,products}/{id} for objects stored with PutObject), sends signed webhook events to a receiver (every event
// it creates is logged for GET /v1/events, delivered or not: Emit creates
// one whose webhook never arrives), and offers control endpoints
// under /sim/ so people trying the product can create, cancel and pay for
// subscriptions with curl:
//
//	POST /sim/subscriptions               {"id","customer","status","cancel_at_period_end","current_period_end"}
//	POST /sim/subscriptions/{id}/cancel   {"at_period_end": bool}
//	POST /sim/invoices/{id}/pay           {"subscription","amount_paid"} (stores the paid invoice, then sends invoice.paid)
//	GET  /sim/stats                       {"api_calls": n}
//
// It imitates the parts of Stripe that catch integrations out, before the
// convenient ones:
//   - every /v1 call needs a known secret key (401 otherwise); a key reads
//     its own account's objects in its own mode (test or live, from the
//     key's name), so the same id can name different objects in two
//     accounts; "Stripe-Account" acts for a connected account, 403 when the
//     key's account is not its platform;
//   - objects carry id, object and livemode; an unknown id is a 404 with
//     Stripe's error (invalid_request_error, resource_missing, param id);
//     a deleted customer stays retrievable as {"id", "object": "customer",
//     "deleted": true} (DeleteCustomer);
//   - the list leaves canceled subscriptions out unless status=all (or
//     canceled, ended) is asked for, comes newest first, and pages with
//     starting_after / has_more, limit 1 to 100;
//   - the customers list leaves deleted customers out (they are still
//     retrievable one by one); the invoices list has every status;
//   - the events list reaches back 30 days only, newest first, filters by
//     created[gte|gt|lte|lt] and types[] (20 at most, exact names) or type
//     (one name, "*" wildcard), pages with starting_after.
//
// SetLatency and SetFailure shape the API's answers for timeout and outage
// tests.
package stripesim
