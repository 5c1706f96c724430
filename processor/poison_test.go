package processor_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/processor"
)

// An event whose data the database rejects (here a snapshot jsonb cannot
// hold) is marked dead with the reason, and the rest of its batch — and its
// partition — goes on. Without the isolation the batch retries forever.
func TestPoisonedEventDoesNotBlockItsPartition(t *testing.T) {
	t.Parallel()
	p := processAll(t, "cb-poison",
		cbSubEvent("ev_poison", "sub_p", 1, `bad\u0000status`),
		cbSubEvent("ev_good", "sub_g", 1, "active"),
		cbSubEvent("ev_after", "sub_p", 2, "active"))
	ctx := context.Background()

	var status, lastErr string
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT status, coalesce(last_error, '') FROM webhook_inbox WHERE event_id = 'ev_poison'`).Scan(&status, &lastErr))
	require.Equal(t, "dead", status)
	require.Contains(t, lastErr, "rejected by the database")
	for _, sub := range []string{"sub_g", "sub_p"} {
		pr, ok := p.Projection(cbSub(sub))
		require.True(t, ok, sub)
		require.Equal(t, "active", pr.Status, sub)
	}
}

// An invoice id is whatever the provider's body says: an id too long for the
// fact's primary-key index (Postgres refuses a btree row over about 2.7 kB
// with 54000) would fail every retry of its batch and hold back every later
// event of the partition. A payload identity is bounded like the event and
// resource ids at intake, so the event is dead as malformed and the
// partition moves on.
func TestOverlongInvoiceIDIsDeadAsMalformedAndItsPartitionMovesOn(t *testing.T) {
	t.Parallel()
	// Random hex does not compress, so the index row really is too large.
	raw := make([]byte, 2000)
	_, _ = rand.Read(raw)
	p := processAll(t, "cb-longid",
		fmt.Sprintf(`{"id":"ev_long","event_type":"payment_succeeded","content":{"invoice":{"id":%q,"status":"paid"},"subscription":{"id":"sub_l","status":"active","resource_version":1}}}`, hex.EncodeToString(raw)),
		cbSubEvent("ev_next", "sub_n", 1, "active"))
	ctx := context.Background()

	var status, lastErr string
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT status, coalesce(last_error, '') FROM webhook_inbox WHERE event_id = 'ev_long'`).Scan(&status, &lastErr))
	require.Equal(t, "dead", status)
	require.Contains(t, lastErr, provider.ErrMalformed.Error())
	require.Contains(t, lastErr, "fact id")
	pr, ok := p.Projection(cbSub("sub_n"))
	require.True(t, ok)
	require.Equal(t, "active", pr.Status)
}

// A poisoned event's change never landed, so the projection it was about may
// be behind the provider: it is parked with the reason, for the reconciler
// to check.
func TestPoisonedEventParksItsProjectionWithTheReason(t *testing.T) {
	t.Parallel()
	p := processAll(t, "cb-park",
		cbSubEvent("ev_k1", "sub_k", 1, "active"),
		cbSubEvent("ev_k2", "sub_k", 2, `bad\u0000status`))

	pr, ok := p.Projection(cbSub("sub_k"))
	require.True(t, ok)
	require.Equal(t, "active", pr.Status)
	require.True(t, pr.NeedsReconcile)
	require.Contains(t, pr.NeedsReconcileReason, "rejected by the database")
}

// A hint whose fetched state the database refuses (here a NUL in the
// subscription's metadata: Stripe's JSON may carry "\u0000", which jsonb
// refuses with 22P05) is dead with the reason, and because the provider's
// state never landed, its projection is parked for the reconciler: a dead
// hint always parks. The projection keeps metadata here
// (projection.state_fields), so the NUL reaches the write.
func TestRefusedFetchedWriteEndsTheHintAndParksItsProjection(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.StateFields = []string{"metadata"} }})
	r := pipelinetest.Resource("sub_nul")
	s := scSub(r.ID, "active")
	p.Sim.Put(s)
	scSend(t, p, "customer.subscription.created", s)
	p.WaitIdle()
	require.Equal(t, "active", scProjection(t, p, r).Status)

	clean := s
	clean.Status = "past_due"
	withNUL := clean
	withNUL.Metadata = map[string]string{"note": "a\x00b"}
	p.Sim.Put(withNUL)
	evID := scSend(t, p, "customer.subscription.updated", clean)

	row := scWaitStatus(t, p, scStripeKey(evID), inbox.StatusDead)
	require.NotNil(t, row.LastError)
	require.Contains(t, *row.LastError, "rejected by the database")
	pr := scProjection(t, p, r)
	require.Equal(t, "active", pr.Status)
	require.True(t, pr.NeedsReconcile, "a dead hint left its projection unparked")
	require.Contains(t, pr.NeedsReconcileReason, evID)
}

// processAll posts Chargebee bodies to a one-partition pipeline through an
// endpoint named id, waits until the relay published them all, so they
// reach the processor together, then processes them and waits until the
// pipeline is idle.
func processAll(t *testing.T, id string, bodies ...string) *pipelinetest.Pipeline {
	t.Helper()
	cb := provider.Endpoint{ID: id, Provider: provider.Chargebee, SourceAccount: "site", Environment: "test", Secrets: []string{"u:p"}}
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true, Endpoints: []provider.Endpoint{cb}})
	for _, body := range bodies {
		h := http.Header{}
		h.Set("Authorization", chargebee.BasicAuth("u", "p"))
		code, resp := p.PostSigned(cb.ID, []byte(body), h)
		require.Equal(t, http.StatusOK, code, resp)
	}
	p.Eventually(func() bool {
		var n int
		return p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n) == nil && n == 0
	}, "relay published every event")
	_, _ = p.StartProcessor(id, nil)
	p.WaitIdle()
	return p
}

// cbSubEvent is a Chargebee subscription_changed event; status is spliced
// into the JSON as is, so it may hold escapes.
func cbSubEvent(id, sub string, version int, status string) string {
	return fmt.Sprintf(`{"id":%q,"event_type":"subscription_changed","content":{"subscription":{"id":%q,"status":"%s","resource_version":%d}}}`,
		id, sub, status, version)
}

func cbSub(id string) message.Resource {
	return message.Resource{Provider: provider.Chargebee, SourceAccount: "site", Environment: "test", Type: "subscription", ID: id}
}
