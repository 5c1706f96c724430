package effects_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

const (
	swEndpoint = "sw-declared"
	swSecret   = "whsec_c2VjcmV0LWZvci1kZWNsYXJlZC1lZmZlY3RzLXRlc3Q="
	swAccount  = "sender_declared"
)

// declaredEffects are the effects of the declared-effects tests: the
// receipt on invoice_paid (as by default), a refund notice on a second
// declared fact type, and an effect on a subscription's cancellation.
func declaredEffects(url string) action.Effects {
	return action.Effects{
		{Kind: action.KindReceipt, OnFact: "invoice_paid", URL: url},
		{Kind: "refund_notice", OnFact: "charge_refunded", URL: url},
		{Kind: "subscription_canceled", On: &action.Transition{Type: "subscription", Field: "status", To: "canceled"}, URL: url},
	}
}

// declaredFacts add a Stripe charge_refunded fact to the default
// invoice_paid.
var declaredFacts = fact.Declarations{
	{Provider: "stripe", Type: "charge_refunded", On: []string{"charge.refunded"}, Fields: []string{"id", "amount_refunded", "currency"}},
}

// actionCounts counts action rows per kind.
func actionCounts(t *testing.T, p *pipelinetest.Pipeline) map[string]int {
	t.Helper()
	rows, err := p.Pool.Query(context.Background(), `SELECT kind, count(*) FROM action GROUP BY kind`)
	require.NoError(t, err)
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		out[k] = n
	}
	require.NoError(t, rows.Err())
	return out
}

// Facts and effects declared, not coded, through the whole pipeline, with
// duplicated, reordered and replayed events: two fact types (invoice_paid,
// charge_refunded) and three effects (a receipt and a refund notice on
// those facts, an effect on a subscription's status becoming canceled).
// Exactly one fact per identity and one action per cause come out: the
// same invoice paid by two events and delivered twice is one fact and one
// receipt; a cancellation fetched (Stripe) or applied at a version
// (Standard Webhooks, its older snapshots arriving late, its newest twice)
// is one transition effect, and a replay of the cancellation event makes
// no second one. Every attempt of each action POSTs byte-identical bodies
// under its stable key to a strict idempotent server (which answers 422 to
// a key reused with another body). Fails if interpreters or the claim keep
// invoice_paid hard-coded (the refund notice would find no fact and die),
// if a transition effect is keyed by anything but its cause, or if its
// body is rebuilt differently per attempt.
func TestDeclaredFactsAndEffectsRecordOneActionPerCause(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, func(_ string, n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable // every action needs a second attempt
		}
		return http.StatusOK
	})
	ctx := context.Background()
	p := pipelinetest.New(t, pipelinetest.Options{
		Endpoints: []provider.Endpoint{{ID: swEndpoint, Provider: provider.StandardWebhooks, SourceAccount: swAccount, Environment: "test",
			Secrets: []string{swSecret}, Paths: provider.Paths{ResourceID: "data.id", State: "data", Version: "data.version"}}},
		Processor: func(c *processor.Config) {
			c.Facts = declaredFacts
			c.Effects = declaredEffects(rcv.url)
		},
	})

	// Stripe: a subscription, its invoice paid twice over (two event types,
	// one delivered twice), a refund, then its cancellation.
	sub := stripesim.Subscription{ID: "sub_decl", Customer: "cus_decl", Status: "active"}
	p.Sim.Put(sub)
	_, code, err := p.Sim.Send(ctx, "customer.subscription.created", sub)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	inv := map[string]any{"id": "in_decl", "object": "invoice", "subscription": "sub_decl", "status": "paid", "amount_paid": 700,
		"currency": "eur", "customer": "cus_decl", "customer_email": "jane@example.com"}
	_, body := p.Sim.Emit("invoice.paid", inv)
	for range 2 {
		h := http.Header{stripe.SignatureHeader: {stripe.Sign(body, pipelinetest.StripeSecret, time.Now())}}
		code, resp := p.PostSigned(pipelinetest.StripeEndpoint, body, h)
		require.Equal(t, http.StatusOK, code, resp)
	}
	_, _, err = p.Sim.Send(ctx, "invoice.payment_succeeded", inv)
	require.NoError(t, err)
	_, _, err = p.Sim.Send(ctx, "charge.refunded", map[string]any{"id": "ch_decl", "object": "charge", "amount_refunded": 300,
		"currency": "eur", "billing_details": map[string]any{"email": "jane@example.com"}})
	require.NoError(t, err)
	p.WaitIdle()
	sub.Status, sub.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(sub)
	cancelID, _, err := p.Sim.Send(ctx, "customer.subscription.deleted", sub)
	require.NoError(t, err)

	// Standard Webhooks: the cancellation (v3) arrives before the older
	// snapshots, and twice under two message ids.
	t0 := time.Now().Add(-time.Hour)
	p.PostStandard(swEndpoint, swSecret, "msg_v3", t0.Add(3*time.Minute), map[string]any{"id": "sub_sw", "version": 3, "status": "canceled"}, "subscription.updated")
	p.PostStandard(swEndpoint, swSecret, "msg_v1", t0.Add(time.Minute), map[string]any{"id": "sub_sw", "version": 1, "status": "active"}, "subscription.updated")
	p.PostStandard(swEndpoint, swSecret, "msg_v2", t0.Add(2*time.Minute), map[string]any{"id": "sub_sw", "version": 2, "status": "past_due"}, "subscription.updated")
	p.PostStandard(swEndpoint, swSecret, "msg_v3_again", t0.Add(3*time.Minute), map[string]any{"id": "sub_sw", "version": 3, "status": "canceled"}, "subscription.updated")
	p.WaitIdle()
	require.Equal(t, map[string]int{"receipt": 1, "refund_notice": 1, "subscription_canceled": 2}, actionCounts(t, p))

	// A replay of both cancellations records no second transition effect.
	n, skipped, err := inbox.ReplayEvents(ctx, p.Pool, []inbox.Key{
		{Provider: "stripe", SourceAccount: pipelinetest.StripeAccount, Environment: "test", EventID: cancelID},
		{Provider: provider.StandardWebhooks, SourceAccount: swAccount, Environment: "test", EventID: "msg_v3"},
	})
	require.NoError(t, err)
	require.Equal(t, 2, n, "%v", skipped)
	p.WaitIdle()
	require.Equal(t, map[string]int{"receipt": 1, "refund_notice": 1, "subscription_canceled": 2}, actionCounts(t, p))

	var facts int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM fact`).Scan(&facts))
	require.Equal(t, 2, facts, "one invoice_paid and one charge_refunded")
	refund, err := fact.Get(ctx, p.Pool, fact.Key{Provider: "stripe", SourceAccount: pipelinetest.StripeAccount, Environment: "test",
		Type: "charge_refunded", ID: "ch_decl"})
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"ch_decl","amount_refunded":300,"currency":"eur"}`, string(refund.Data), "only the declared fields are kept")

	snd := newSender(t, p.Pool, rcv.url, func(c *effects.Config) { c.Effects = declaredEffects(rcv.url) })
	sw := action.Key{Provider: provider.StandardWebhooks, SourceAccount: swAccount, Environment: "test",
		SubjectID: "subscription/sub_sw@v3", Kind: "subscription_canceled"}
	for _, k := range []action.Key{
		{Provider: "stripe", SourceAccount: pipelinetest.StripeAccount, Environment: "test", SubjectID: "in_decl", Kind: action.KindReceipt},
		{Provider: "stripe", SourceAccount: pipelinetest.StripeAccount, Environment: "test", SubjectID: "ch_decl", Kind: "refund_notice"},
		sw,
	} {
		sendUntil(t, snd, p.Pool, k, action.StatusSent)
	}
	var stripeCancel action.Key
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT provider, source_account, environment, subject_id, kind FROM action
WHERE provider = 'stripe' AND kind = 'subscription_canceled'`).Scan(&stripeCancel.Provider, &stripeCancel.SourceAccount,
		&stripeCancel.Environment, &stripeCancel.SubjectID, &stripeCancel.Kind))
	require.Regexp(t, `^subscription/sub_decl@f[0-9]+$`, stripeCancel.SubjectID, "a fetched transition is keyed by its fetch")
	sendUntil(t, snd, p.Pool, stripeCancel, action.StatusSent)

	bodies := map[string][]string{}
	for _, r := range rcv.sim.Requests() {
		require.NotEqual(t, http.StatusUnprocessableEntity, r.Code, "key %s reused with another body", r.Key)
		bodies[r.Key] = append(bodies[r.Key], string(r.Body))
	}
	require.Len(t, bodies, 4)
	for key, bs := range bodies {
		require.Len(t, bs, 2, key)
		require.Equal(t, bs[0], bs[1], "attempts of %s differ", key)
	}
	require.JSONEq(t, `{"action_key":"hookyard:standard-webhooks:sender_declared:test:subscription/sub_sw@v3:subscription_canceled",
		"kind":"subscription_canceled","provider":"standard-webhooks","source_account":"sender_declared","environment":"test",
		"resource_type":"subscription","resource_id":"sub_sw","field":"status","from":"","to":"canceled","version":3,"event_id":"msg_v3"}`,
		bodies[sw.String()][0])
	stripeBody := bodies[stripeCancel.String()][0]
	require.Contains(t, stripeBody, `"from":"active","to":"canceled"`)
}
