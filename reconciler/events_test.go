package reconciler_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/reconciler"
)

func stripeEventsSource(p *pipelinetest.Pipeline) provider.Source {
	return provider.Source{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test",
		Endpoint: &p.Endpoints[0], Events: stripe.Events{Client: p.Stripe}, Identify: stripe.Verifier{}}
}

// An invoice.paid whose webhook never came is found by the events scan and
// ingested under its own identity, so the payment is recorded once: a
// second scan over the same window (the overlap) finds it already in the
// inbox, and the real delivery arriving late is a duplicate. Fails if the
// scan stores listed events under another identity than the receiver's
// (two rows, two facts), or does not scan at all.
func TestPaidInvoiceWhoseWebhookWasLostIsRecordedOnceByOverlappingScans(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()
	sub := stripesim.Subscription{ID: "sub_paid", Customer: "cus", Status: "active"}
	p.Sim.Put(sub)
	sub, _ = p.Sim.Get(sub.ID)
	_, status, err := p.Sim.Send(ctx, "customer.subscription.created", sub)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	inv := stripesim.Invoice{ID: "in_lost", Object: "invoice", Customer: "cus", Subscription: sub.ID, Status: "paid",
		AmountPaid: 1200, Currency: "usd", Created: time.Now().Unix()}
	lostID, lostBody := p.Sim.Emit("invoice.paid", inv) // Stripe created it; the webhook never arrived

	r := reconciler.New(p.Pool, p.Log, reconciler.Config{PageSize: 1, Registerer: prometheus.NewRegistry(),
		Sources: []provider.Source{stripeEventsSource(p)}})
	rep, err := r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.EqualValues(t, 1, rep.Sources[0].EventsIngested, "the lost invoice.paid; the delivered event is a duplicate")
	require.True(t, rep.Sources[0].Listings[0].Complete)
	facts := func() int {
		var n int
		require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM fact WHERE fact_type = 'invoice_paid' AND fact_id = 'in_lost'`).Scan(&n))
		return n
	}
	p.Eventually(func() bool { return facts() == 1 }, "the payment is recorded")

	// The next scan starts at the checkpoint's high water minus the overlap:
	// it lists the same events again and ingests none of them.
	rep, err = r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.Zero(t, rep.Sources[0].EventsIngested)
	require.GreaterOrEqual(t, rep.Sources[0].Listings[0].Pages, 2, "the overlap lists both events again")

	// The webhook finally arrives: a duplicate.
	code, body := p.PostSigned(pipelinetest.StripeEndpoint, lostBody,
		http.Header{stripe.SignatureHeader: {stripe.Sign(lostBody, pipelinetest.StripeSecret, time.Now())}})
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"duplicate"`)
	p.WaitIdle()
	require.Equal(t, 1, facts())
	var rows int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE event_id = $1 AND endpoint_id = $2 AND source_account = $3`,
		lostID, pipelinetest.StripeEndpoint, pipelinetest.StripeAccount).Scan(&rows))
	require.Equal(t, 1, rows)
}

// The events list reaches back 30 days at most, newest first; a scan that
// starts before that sees only what Stripe still lists, and the first walk
// starts at the overlap before now rather than ingesting 30 days of
// history. Fails if the scan's first walk has no lower bound.
func TestFirstEventsScanStartsAtTheOverlapNotThirtyDaysBack(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	p.Sim.EmitAt("invoice.paid", stripesim.Invoice{ID: "in_old", Object: "invoice", Subscription: "sub_x"}, time.Now().Add(-2*time.Hour))
	p.Sim.EmitAt("invoice.paid", stripesim.Invoice{ID: "in_recent", Object: "invoice", Subscription: "sub_x"}, time.Now().Add(-time.Minute))
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Overlap: 10 * time.Minute,
		Sources: []provider.Source{stripeEventsSource(p)}})
	rep, err := r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.EqualValues(t, 1, rep.Sources[0].EventsIngested, "only the event inside the overlap")
	cp, err := reconciler.LoadCheckpoint(ctx, p.Pool, "stripe/"+pipelinetest.StripeAccount+"/test", reconciler.ListingEvents)
	require.NoError(t, err)
	require.NotNil(t, cp.HighWater)
	require.WithinDuration(t, time.Now().Add(-time.Minute), *cp.HighWater, 5*time.Second)
}

// The events scan asks Stripe only for the types the endpoint accepts
// (types[] when its allow-list names at most 20 exact types) and ingests
// nothing else; with wildcards it lists every type and keeps what the
// allow-list admits. Fails if the scan ingests events the endpoint would
// have refused as deliveries.
func TestEventsScanIngestsOnlyTypesTheEndpointAccepts(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"invoice.paid"}, stripe.EventTypes([]string{"invoice.paid"}))
	require.Nil(t, stripe.EventTypes([]string{"customer.subscription.*", "invoice.paid"}), "no wildcards in types[]")
	require.Nil(t, stripe.EventTypes(nil))

	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	p.Sim.Emit("invoice.paid", stripesim.Invoice{ID: "in_1", Object: "invoice", Subscription: "sub_1"})
	p.Sim.Emit("customer.subscription.updated", stripesim.Subscription{ID: "sub_1", Object: "subscription", Status: "active"})
	p.Sim.Emit("charge.succeeded", map[string]any{"id": "ch_1", "object": "charge"})
	for _, allowed := range [][]string{{"invoice.paid"}, {"invoice.*"}} {
		ep := p.Endpoints[0]
		ep.EventTypes = allowed
		src := stripeEventsSource(p)
		src.Endpoint = &ep
		_, err := p.Pool.Exec(ctx, `DELETE FROM reconcile_checkpoint`) // each allow-list walks from the start
		require.NoError(t, err)
		src.Events = stripe.Events{Client: p.Stripe, Types: stripe.EventTypes(allowed)}
		r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Sources: []provider.Source{src}})
		_, err = r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		var types []string
		rows, err := p.Pool.Query(ctx, `SELECT event_type FROM webhook_inbox ORDER BY event_type`)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			types = append(types, s)
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"invoice.paid"}, types, "allow-list %v", allowed)
	}
}

// Stripe keeps events for 30 days: a walk interrupted for longer (a
// reconciler stopped for a month, a rate limit that lasted) resumes from a
// cursor Stripe no longer lists and answers 400 resource_missing for. The
// scan then walks again from its lower bound (what is already in the inbox
// is a duplicate) instead of failing on the same cursor every round. Fails
// without the restart.
func TestEventsWalkWhoseCursorExpiredStartsAgainFromItsLowerBound(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	expired, _ := p.Sim.EmitAt("invoice.paid", stripesim.Invoice{ID: "in_expired", Object: "invoice", Subscription: "sub_x"}, time.Now().Add(-31*24*time.Hour))
	p.Sim.EmitAt("invoice.paid", stripesim.Invoice{ID: "in_recent", Object: "invoice", Subscription: "sub_x"}, time.Now().Add(-time.Minute))
	src := stripeEventsSource(p)
	walk := fmt.Sprintf(`{"since":%q,"cursor":%q}`, time.Now().Add(-40*24*time.Hour).UTC().Format(time.RFC3339Nano), expired)
	_, err := p.Pool.Exec(ctx, `INSERT INTO reconcile_checkpoint (source, listing, cursor, last_error) VALUES ($1, $2, $3, 'rate limited')`,
		src.Name(), reconciler.ListingEvents, walk)
	require.NoError(t, err)

	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Sources: []provider.Source{src}})
	rep, err := r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	lr := rep.Sources[0].Listings[0]
	require.True(t, lr.Complete, "the walk started again and completed: %+v", lr)
	require.EqualValues(t, 1, rep.Sources[0].EventsIngested, "the event Stripe still lists")
	cps, err := reconciler.Checkpoints(ctx, p.Pool)
	require.NoError(t, err)
	require.Len(t, cps, 1)
	require.Empty(t, cps[0].LastError)
	require.NotNil(t, cps[0].HighWater)
}

// With a backfill, a source's first events walk reaches that far back (as
// far as Stripe still lists), so a new installation ingests the payments of
// the last days; later walks start at the overlap before the checkpoint.
// Fails if the first walk ignores the backfill.
func TestFirstEventsScanReachesBackAsFarAsTheBackfill(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	p.Sim.EmitAt("invoice.paid", stripesim.Invoice{ID: "in_2d", Object: "invoice", Subscription: "sub_x"}, time.Now().Add(-48*time.Hour))
	p.Sim.EmitAt("invoice.paid", stripesim.Invoice{ID: "in_9d", Object: "invoice", Subscription: "sub_x"}, time.Now().Add(-9*24*time.Hour))
	p.Sim.EmitAt("invoice.paid", stripesim.Invoice{ID: "in_recent", Object: "invoice", Subscription: "sub_x"}, time.Now().Add(-time.Minute))
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Overlap: 10 * time.Minute,
		Backfill: 7 * 24 * time.Hour, Sources: []provider.Source{stripeEventsSource(p)}})
	rep, err := r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.EqualValues(t, 2, rep.Sources[0].EventsIngested, "the events of the last 7 days, not the one 9 days back")
	p.Sim.EmitAt("invoice.paid", stripesim.Invoice{ID: "in_3d", Object: "invoice", Subscription: "sub_x"}, time.Now().Add(-72*time.Hour))
	rep, err = r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.Zero(t, rep.Sources[0].EventsIngested, "a later walk starts at the overlap before the checkpoint")
}
