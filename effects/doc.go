// Package effects performs the external effects the processor recorded as
// `action` rows — the receipt of a paid invoice and every declared effect
// (action.Effect), each an HTTP POST to its kind's URL — and keeps each
// action's outcome. A fact's effect POSTs its fact; a transition's, the
// body stored with it. The rows, their
// state machine and every statement over them belong to package action;
// this package is the sender: HTTP, backoff, metrics and tracing.
//
// The processor records an action in the transaction that records its fact
// (invariant 9: recorded before attempted, under a stable key). Whether a
// receipt is owed is decided there, from the invoice fact; this package never
// reads the subscription's state, so a receipt goes out for an invoice paid
// just before a cancellation.
//
// A sender claims due actions (action.Claim), which commits before any
// request is made: no transaction stays open across the call. The lease is
// Timeout + LeaseMargin and the request's deadline is Timeout from before
// the claim, so a request always ends before its lease does and two senders
// never send one action at the same time. The outcome is written
// (action.Settle) only while the lease is held.
//
// Every attempt of an action carries the same Idempotency-Key, its stable
// key (see action.Key.String), and the same body bytes (invariant 12), as
// draft-ietf-httpapi-idempotency-key-header asks of a client. After a 2xx
// the action is sent and is never claimed again. If a sender dies between
// the receiving server's 2xx and the status write, the lease expires and
// the next attempt repeats the request with that key: a standard server
// replays its stored 2xx. A 409 (the key's first request still in
// progress) is not a success: that request may yet fail, so the action is
// ambiguous and retried with the same key.
//
// A subscriber's delivery (kind "change:<name>", package subscriber) is
// claimed in order per resource (action.ClaimOrdered) and carries the
// Standard Webhooks headers besides: webhook-id is the stable key,
// webhook-timestamp the attempt's time, webhook-signature made by the
// official library over both and the body. The body and the id are the
// same on every attempt; the timestamp and signature are the attempt's.
//
// This package must never open a transaction around an HTTP call, never
// hold SQL of its own, and never decide an action from the current
// subscription state.
package effects
