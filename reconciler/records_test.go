package reconciler_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/reconciler"
)

// recordKeys are the only fields a record of the events topic may have:
// identities, times and reasons, never a body or a state.
var recordKeys = []string{"kind", "provider", "source_account", "environment", "resource_type", "resource_id",
	"event_id", "event_type", "endpoint_id", "enqueued_at", "reason", "traceparent", "tracestate", "listed_seq"}

// Kafka records carry identities, not payloads (invariant 15): every
// record the pipeline produces — webhooks' events, a walk's checks with
// the listing's state, stale checks — has only identity fields, each a
// string or a number, and no customer value a provider sent appears in
// any; the listed states wait in reconcile_listed and leave it with their
// checks. Fails if a check carries the listed object (as it did), or if
// any message kind gains a field holding a document.
func TestRecordsCarryIdentitiesNotPayloads(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx := context.Background()
	const customer = "cus_personal_7f3a"
	for _, id := range []string{"sub_walk_1", "sub_walk_2", "sub_walk_3"} {
		p.Sim.Put(stripesim.Subscription{ID: id, Customer: customer, Status: "active", Created: time.Now().Add(-time.Hour).Unix()})
	}
	live := stripesim.Subscription{ID: "sub_live", Customer: customer, Status: "active", Created: time.Now().Unix()}
	p.Sim.Put(live)
	_, _, err := p.Sim.Send(ctx, "customer.subscription.updated", live)
	require.NoError(t, err)
	_, _, err = p.Sim.Send(ctx, "invoice.paid", map[string]any{"id": "in_rec", "object": "invoice", "subscription": "sub_live",
		"status": "paid", "customer": customer, "customer_email": "jane@example.com", "amount_paid": 100})
	require.NoError(t, err)
	p.WaitIdle()
	_, err = p.Pool.Exec(ctx, `UPDATE projection SET observed_at = now() - interval '2 days' WHERE resource_id = 'sub_live'`)
	require.NoError(t, err)

	r := reconciler.New(p.Pool, p.Log, reconciler.Config{Registerer: prometheus.NewRegistry(), Sources: []provider.Source{stripeSource(p)}})
	rep, err := r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	require.GreaterOrEqual(t, rep.Sources[0].Checks, int64(4), "three listed, one stale")
	for _, id := range []string{"sub_walk_1", "sub_walk_2", "sub_walk_3"} {
		res := pipelinetest.Resource(id)
		p.Eventually(func() bool { _, ok := p.Projection(res); return ok }, "%s is projected from its listing", id)
	}
	p.WaitIdle()

	var events int64
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox`).Scan(&events))
	recs := p.Records(int(events + rep.Sources[0].Checks))
	kinds := map[string]int{}
	listed := 0
	for _, rec := range recs {
		require.NotContains(t, string(rec.Value), customer, "a record holds a customer's id: %s", rec.Value)
		require.NotContains(t, string(rec.Value), "jane@example.com")
		var m map[string]any
		require.NoError(t, json.Unmarshal(rec.Value, &m))
		for k, v := range m {
			require.True(t, slices.Contains(recordKeys, k), "record field %q is not an identity: %s", k, rec.Value)
			switch v.(type) {
			case string, float64:
			default:
				t.Fatalf("record field %q holds a %T: %s", k, v, rec.Value)
			}
		}
		kinds[m["kind"].(string)+"/"+strings.TrimSpace(m["reason"].(string))]++
		if _, ok := m["listed_seq"]; ok {
			listed++
		}
	}
	require.Positive(t, kinds["event/webhook"], "%v", kinds)
	require.Positive(t, kinds["check/reconcile"], "%v", kinds)
	require.GreaterOrEqual(t, listed, 3, "the walk's checks name their listings")

	var left int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM reconcile_listed`).Scan(&left))
	require.Zero(t, left, "every listed state went with its check")
}
