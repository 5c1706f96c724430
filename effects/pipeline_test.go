package effects_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// Invariants 8 and 9 through the whole pipeline: an invoice paid just
// before the subscription's cancellation gets its receipt, decided from the
// invoice fact and never from the subscription's current (canceled) state;
// the receipt carries the invoice's kept fields (its fact's declaration:
// amount, currency, customer, subscription, paid time; not the customer's
// e-mail or name, invariant 15) and its stable key. Fails if the sender
// (or the processor) consults the subscription before sending, or if the
// receipt carries the invoice as the provider sent it.
func TestReceiptSentForInvoicePaidJustBeforeCancellation(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()
	sub := stripesim.Subscription{ID: "sub_rcpt", Customer: "cus_rcpt", Status: "active"}
	p.Sim.Put(sub)
	inv := map[string]any{"id": "in_rcpt", "object": "invoice", "subscription": "sub_rcpt", "status": "paid", "amount_paid": 900,
		"currency": "eur", "customer": "cus_rcpt", "customer_email": "jane@example.com", "customer_name": "Jane Roe",
		"status_transitions": map[string]any{"paid_at": 1700000000, "finalized_at": 1699990000}}
	_, code, err := p.Sim.Send(ctx, "invoice.paid", inv)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	sub.Status, sub.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(sub)
	_, code, err = p.Sim.Send(ctx, "customer.subscription.deleted", sub)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	p.WaitIdle()
	pr, ok := p.Projection(pipelinetest.Resource("sub_rcpt"))
	require.True(t, ok)
	require.Equal(t, "canceled", pr.Status)

	rcv := newReceiver(t, func(string, int) int { return http.StatusOK })
	snd := newSender(t, p.Pool, rcv.url, nil)
	k := action.Key{Provider: "stripe", SourceAccount: pipelinetest.StripeAccount, Environment: "test", SubjectID: "in_rcpt", Kind: action.KindReceipt}
	sendUntil(t, snd, p.Pool, k, action.StatusSent)
	reqs := rcv.requests()
	require.Len(t, reqs, 1)
	require.Equal(t, "hookyard:stripe:acct_test:test:in_rcpt:receipt", reqs[0].key)
	b := reqs[0].body
	require.Equal(t, reqs[0].key, b.ActionKey)
	require.Equal(t, 1, reqs[0].attempt)
	require.Equal(t, "invoice_paid", b.Fact.Type)
	require.Equal(t, "in_rcpt", b.Fact.ID)
	require.Equal(t, "sub_rcpt", b.Fact.ResourceID)
	require.JSONEq(t, `{"id":"in_rcpt","object":"invoice","subscription":"sub_rcpt","status":"paid","amount_paid":900,
		"currency":"eur","customer":"cus_rcpt","status_transitions":{"paid_at":1700000000}}`, string(b.Fact.Data))
}
