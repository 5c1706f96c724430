// Package action owns the action table: the external effects the processor
// records, each under a stable key (see Key.String), and the effects'
// declarations (Effect: on a fact, like the receipt of a paid invoice, or
// on a projection transition, whose body is stored with the action), and
// every statement that reads or writes them — the
// processor's insert (QueueRecord, queued into its batch transaction), the
// sender's claim and settle, and the operators' list, show and replay.
//
// # State machine
//
//	pending ──claim──▶ sending ──2xx (a replayed stored 2xx too)──▶ sent
//	                      │ ├──5xx, 408, 429, refused connection──▶ failed ──due──▶ sending
//	                      │ ├──timeout, cut connection after the request left, 409 in progress──▶ ambiguous ──due──▶ sending
//	                      │ └──422, other 4xx, a 3xx, no fact, or attempts exhausted──▶ dead ──replay──▶ pending
//	                      └──lease expired (sender killed)──▶ claimed again: sending
//
// A claim is one statement: it picks due actions (pending, failed, ambiguous,
// or sending with an expired lease) in next_attempt_at order through the
// partial index action_due, with FOR UPDATE SKIP LOCKED, and marks them
// sending with attempts+1 and next_attempt_at = now() + lease. It commits
// before any request is made. The outcome is written only while the action
// is still sending under the same attempt number (the attempt number is the
// claim's token: it only grows, a replay included); a sender that lost its
// lease writes nothing, and the action's next owner sends it again.
//
// An ordered kind (a subscriber's changes, OrderedRecord) has streams:
// its actions carry an order_key (the resource) and an order_seq drawn at
// the insert, and ClaimOrdered takes an action only when no earlier action
// of its stream is unsettled, dead included (dead blocks the stream until
// it is replayed).
//
// Two statements here also read fact, the table of package fact: the claim
// joins each claimed action's fact, and ForResource finds a resource's
// actions through its facts. Each stays one statement (one snapshot, one
// plan, checked on tables without statistics); the fact package owns every
// statement that writes facts and the reads of a fact on its own.
//
// Timestamps that decide claims come from Postgres's clock (now()), never
// from a sender's, so senders on machines with skewed clocks still agree.
// This package makes no HTTP call; it must never decide an action from the
// current subscription state, and never send an action that is sent.
package action
