package processor_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/retention"
)

// An event delivered again after retention forgot its identity (past
// retention.identity_age) is taken as new by intake, and still changes
// nothing: its fact is recorded by the invoice's identity (no second fact),
// its receipt under the invoice's stable key (no second action, the first
// untouched), and a versioned snapshot older than the projection is
// recorded as stale (no regression). Fails if any of those writes is keyed
// by the event, or if versions are not compared inside the write.
func TestEventRedeliveredAfterItsIdentityLeftTheLedgerChangesNothing(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	ctx := context.Background()

	// A Chargebee subscription at version 5 (active), then 7 (cancelled).
	sub := scCBRes("sub_again")
	v5 := scCBEvent("ev_again_v5", "subscription_changed", sub.ID, "active", 5, time.Now().Unix())
	scPostCB(t, p, v5)
	p.WaitIdle()
	scPostCB(t, p, scCBEvent("ev_again_v7", "subscription_cancelled", sub.ID, "cancelled", 7, time.Now().Unix()))
	// A paid Stripe invoice: a fact and a receipt.
	s := scSub("sub_inv", "active")
	p.Sim.Put(s)
	invID, inv := p.Sim.Emit("invoice.paid", map[string]any{"id": "in_again", "object": "invoice", "subscription": s.ID, "status": "paid"})
	postStripe := func() {
		h := http.Header{}
		h.Set(stripe.SignatureHeader, stripe.Sign(inv, pipelinetest.StripeSecret, time.Now()))
		code, resp := p.PostSigned(pipelinetest.StripeEndpoint, inv, h)
		require.Equal(t, http.StatusOK, code, resp)
	}
	postStripe()
	p.WaitIdle()
	scWaitStatus(t, p, scStripeKey(invID), inbox.StatusProcessed)
	scWaitStatus(t, p, scCBKey("ev_again_v7"), inbox.StatusProcessed)
	before := scProjection(t, p, sub)
	require.EqualValues(t, 7, *before.Version)
	const facts = `SELECT count(*) FROM fact WHERE fact_id = 'in_again'`
	const actions = `SELECT count(*) FROM action WHERE subject_id = 'in_again' AND kind = 'receipt'`
	const receipt = `SELECT event_id || '/' || status || '/' || attempts || '/' || created_at FROM action WHERE subject_id = 'in_again'`
	require.Equal(t, 1, scCount(t, p, facts))
	require.Equal(t, 1, scCount(t, p, actions))
	var firstReceipt string
	require.NoError(t, p.Pool.QueryRow(ctx, receipt).Scan(&firstReceipt))

	// Forty days on, retention forgets every finished identity.
	rep, err := retention.Run(ctx, p.Pool, p.Log, retention.Policy{IdentityAge: 35 * 24 * time.Hour, PartitionInterval: 24 * time.Hour},
		time.Now().Add(40*24*time.Hour))
	require.NoError(t, err)
	require.GreaterOrEqual(t, rep.Forgotten, int64(3))
	for _, k := range []inbox.Key{scStripeKey(invID), scCBKey("ev_again_v5"), scCBKey("ev_again_v7")} {
		_, err := inbox.Get(ctx, p.Pool, k, false)
		require.ErrorIs(t, err, inbox.ErrNotFound, "%s left the ledger", k.EventID)
	}

	// The same deliveries again: new to the ledger, processed again.
	scPostCB(t, p, v5)
	postStripe()
	p.WaitIdle()
	scWaitStatus(t, p, scCBKey("ev_again_v5"), inbox.StatusProcessed)
	scWaitStatus(t, p, scStripeKey(invID), inbox.StatusProcessed)

	require.Equal(t, 1, scCount(t, p, facts), "no second fact")
	require.Equal(t, 1, scCount(t, p, actions), "no second receipt")
	var againReceipt string
	require.NoError(t, p.Pool.QueryRow(ctx, receipt).Scan(&againReceipt))
	require.Equal(t, firstReceipt, againReceipt, "the receipt is untouched")
	after := scProjection(t, p, sub)
	require.EqualValues(t, 7, *after.Version, "no regression")
	require.Equal(t, before.Status, after.Status)
	require.NotEmpty(t, scHistoryOf(scHistory(t, p, sub), "ev_again_v5"))
	var outcome string
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT outcome FROM projection_history WHERE event_id = 'ev_again_v5' ORDER BY id DESC LIMIT 1`).Scan(&outcome))
	require.Equal(t, "stale", outcome, "the old snapshot is recorded as stale")
}
