// Package e2e drives the whole pipeline over real HTTP, Postgres and Kafka
// wire protocol: receiver → webhook_inbox/outbox → relay → kfake → processor
// → projection → access API.
package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

func sub(id, status string) stripesim.Subscription {
	return stripesim.Subscription{ID: id, Customer: "cus_" + id, Status: status,
		CurrentPeriodEnd: time.Now().Add(30 * 24 * time.Hour).Unix()}
}

func TestSignedStripeWebhookBecomesAccessDecision(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()

	p.Sim.Put(sub("sub_e2e", "active"))
	s, _ := p.Sim.Get("sub_e2e")
	_, status, err := p.Sim.Send(ctx, "customer.subscription.created", s)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)

	p.Eventually(func() bool { d, code := p.Access("sub_e2e"); return code == 200 && d.Access }, "access granted")
	d, _ := p.Access("sub_e2e")
	require.Equal(t, "active", d.Reason)
}

// The promise: the cancellation arrives first, the older "active" event
// second, then a duplicate of the cancellation — access stays closed.
func TestLateActiveEventNeverReopensAccess(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()

	active := sub("sub_late", "active")
	p.Sim.Put(active)
	// The "active" event as it was generated before the cancellation; it is
	// delivered last.
	_, lateActive := p.Sim.Event("customer.subscription.updated", active)

	canceled := active
	canceled.Status, canceled.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(canceled)
	cancelID, cancelBody := p.Sim.Event("customer.subscription.deleted", canceled)

	post := func(body []byte) int { return postStripe(p, body) }
	require.Equal(t, http.StatusOK, post(cancelBody))
	p.WaitIdle()
	require.Equal(t, http.StatusOK, post(lateActive))
	require.Equal(t, http.StatusOK, post(cancelBody)) // duplicate: accepted, no new work
	p.WaitIdle()

	d, code := p.Access("sub_late")
	require.Equal(t, http.StatusOK, code)
	require.False(t, d.Access, "a late active event re-opened access: %+v", d)
	require.Equal(t, "canceled", d.Reason)

	var rows, outboxRows int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE event_id = $1`, cancelID).Scan(&rows))
	require.Equal(t, 1, rows, "a repeated delivery created a second inbox row")
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&outboxRows))
	require.Zero(t, outboxRows)
	var inboxTotal int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox`).Scan(&inboxTotal))
	require.Equal(t, 2, inboxTotal, "two events, three deliveries")
}

func postStripe(p *pipelinetest.Pipeline, body []byte) int {
	h := http.Header{}
	h.Set(stripe.SignatureHeader, stripe.Sign(body, pipelinetest.StripeSecret, time.Now()))
	code, _ := p.PostSigned(pipelinetest.StripeEndpoint, body, h)
	return code
}
