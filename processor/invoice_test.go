package processor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/processor"
)

// An invoice of a subscription, on an endpoint that projects invoices, is
// projected as itself (GET /v1/invoices/{id}) and its subscription is still
// refreshed, each on its own key, in its own partition, under its own
// fence. Two invoices of one subscription (one naming it the pre-basil way,
// "subscription", one as basil does, parent.subscription_details), and a
// subscription that went past_due with no event of its own: only the
// invoices' events say so. Every event is delivered reversed, twice,
// concurrently. Fails if an invoice of a subscription is keyed by the
// subscription (no invoice projection), if the invoice's event no longer
// refreshes the subscription (it stays active), or if an invoice
// projection is not what Stripe says last.
func TestSubscriptionInvoicesAreProjectedAndTheirSubscriptionStaysCurrent(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{StripeProject: []string{"subscription", "customer", "invoice"}})
	sub := scSub("sub_inv", "active")
	p.Sim.Put(sub)
	_, created := p.Sim.Emit("customer.subscription.created", sub)

	inv := func(id, status string, basil bool) map[string]any {
		o := map[string]any{"id": id, "object": "invoice", "customer": sub.Customer, "status": status, "amount_due": 900, "currency": "eur"}
		if basil {
			o["parent"] = map[string]any{"type": "subscription_details", "subscription_details": map[string]any{"subscription": sub.ID}}
		} else {
			o["subscription"] = sub.ID
		}
		return o
	}
	res := func(typ, id string) message.Resource {
		return message.Resource{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test", Type: typ, ID: id}
	}
	postChaos(t, p, []delivery{stripeDelivery(created)})
	p.WaitIdle()
	require.Equal(t, "active", scProjection(t, p, res("subscription", sub.ID)).Status)

	var ds []delivery
	story := []struct {
		typ, id, status string
		basil           bool
	}{
		{"invoice.created", "in_one", "draft", false},
		{"invoice.finalized", "in_one", "open", false},
		{"invoice.paid", "in_one", "paid", false},
		{"invoice.created", "in_two", "draft", true},
		{"invoice.finalized", "in_two", "open", true},
		{"invoice.payment_failed", "in_two", "open", true},
	}
	for _, e := range story {
		p.Sim.PutObject("invoice", inv(e.id, e.status, e.basil))
		_, body := p.Sim.Emit(e.typ, inv(e.id, e.status, e.basil))
		ds = append(ds, stripeDelivery(body))
	}
	// The second invoice's payment failed: Stripe moved the subscription
	// to past_due, and the invoice's events are all that tell hookyard.
	sub.Status = "past_due"
	p.Sim.Put(sub)
	postChaos(t, p, ds)
	p.WaitIdle()

	p.Eventually(func() bool {
		pr, ok := p.Projection(res("subscription", sub.ID))
		return ok && pr.Status == "past_due"
	}, "the subscription refreshed by its invoices' events")
	p.WaitIdle()
	for id, want := range map[string]string{"in_one": "paid", "in_two": "open"} {
		pr := scProjection(t, p, res("invoice", id))
		require.Equal(t, want, pr.Status, id)
		st := stateOf(t, pr)
		require.Equal(t, "invoice", st["object"], id)
		require.Equal(t, id, st["id"], id)
	}
	pr := scProjection(t, p, res("subscription", sub.ID))
	require.Equal(t, "past_due", pr.Status)

	// Each invoice event is the invoice's, handled once, whatever its copies.
	require.Equal(t, 6, scCount(t, p, `SELECT count(*) FROM webhook_inbox WHERE resource_type = 'invoice' AND status = 'processed'`))
	require.Zero(t, scCount(t, p, `SELECT count(*) FROM webhook_inbox WHERE status <> 'processed'`))
	// The subscription's refreshes are its own partition's checks, each
	// naming the invoice event that asked for it.
	refreshed := scHistory(t, p, res("subscription", sub.ID))
	n := 0
	for _, h := range refreshed {
		if h.EventID != "" && h.Outcome == projection.Fetched {
			n++
		}
	}
	require.GreaterOrEqual(t, n, 1, "no refresh of the subscription was written")
}

// A refresh check is retried by no event: when its fetch fails, the
// subscription's projection is parked (needs_reconcile), so the
// reconciler checks it until a fetch succeeds. Here Stripe fails every
// call: the invoice's event dies after its attempts, is settled, and its
// refresh of the subscription fails too. Fails if a failed refresh is
// only noted in the history.
func TestFailedSubscriptionRefreshParksItsProjection(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{StripeProject: []string{"subscription", "invoice"},
		Processor: func(c *processor.Config) { c.MaxAttempts = 2 }})
	sub := scSub("sub_refresh_fails", "active")
	p.Sim.Put(sub)
	scSend(t, p, "customer.subscription.created", sub)
	p.WaitIdle()
	res := message.Resource{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test", Type: "subscription", ID: sub.ID}
	require.Equal(t, "active", scProjection(t, p, res).Status)

	p.Sim.SetFailure(500)
	evID := scSend(t, p, "invoice.payment_failed", map[string]any{"id": "in_refresh", "object": "invoice", "subscription": sub.ID, "status": "open"})
	scWaitStatus(t, p, scStripeKey(evID), inbox.StatusDead)
	p.Eventually(func() bool {
		return scCount(t, p, `SELECT count(*) FROM projection WHERE resource_id = $1 AND needs_reconcile`, sub.ID) == 1
	}, "the subscription parked after its refresh failed")
	var failed int
	for _, h := range scHistory(t, p, res) {
		if h.EventID == evID && h.Outcome == projection.FetchFailed {
			failed++
		}
	}
	require.Equal(t, 1, failed, "the refresh's failure, naming the invoice's event")
}
