// Package effects performs the external effects the processor recorded as
// `action` rows — today the receipt of a paid invoice, an HTTP POST to the
// configured receipt URL — and keeps each action's outcome.
//
// The processor records an action in the transaction that records its fact
// (invariant 9: recorded before attempted, under a stable key). Whether a
// receipt is owed is decided there, from the invoice fact; this package never
// reads the subscription's state, so a receipt goes out for an invoice paid
// just before a cancellation.
//
// # State machine
//
//	pending ──claim──▶ sending ──2xx, or 409 for the same key──▶ sent
//	                      │ ├──5xx, 408, 429, refused connection──▶ failed ──due──▶ sending
//	                      │ ├──timeout, cut connection after the request left──▶ ambiguous ──due──▶ sending
//	                      │ └──other 4xx, a 3xx, no fact, or attempts exhausted──▶ dead ──replay──▶ pending
//	                      └──lease expired (sender killed)──▶ claimed again: sending
//
// A claim is one statement: it picks due actions (pending, failed, ambiguous,
// or sending with an expired lease) in next_attempt_at order through the
// partial index action_due, with FOR UPDATE SKIP LOCKED, and marks them
// sending with attempts+1 and next_attempt_at = now() + lease. It commits
// before any request is made: no transaction stays open across the call.
// The lease is Timeout + LeaseMargin and the request's deadline is Timeout
// from before the claim, so a request always ends before its lease does and
// two senders never send one action at the same time. The outcome is written
// only while the action is still sending under the same attempt number (the
// attempt number is the claim's token: it only grows, a replay included); a
// sender that lost its lease writes nothing, and the action's next owner
// sends it again.
//
// Every attempt of an action carries the same Idempotency-Key, its stable
// key (see Key.String). After a definite success the action is sent and is
// never claimed again. If a sender dies between the receiving server's 2xx
// and the status write, the lease expires and the next attempt repeats the
// request with that key: the receiving server must treat a repeated key as
// the same receipt (and may answer 409, which counts as success).
//
// Timestamps that decide claims come from Postgres's clock (now()), never
// from a sender's, so senders on machines with skewed clocks still agree.
// This package must never open a transaction around an HTTP call, and never
// decide an action from the current subscription state.
package effects
