package processor_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/processor"
)

// Scenario endpoints, beside the harness's Stripe one.
const (
	scCB      = "cb"
	scCBSite  = "site"
	scSW      = "sw"
	scSWAcct  = "sender"
	scSWInc   = "sw-inc"
	scSWIncAc = "sender-inc"
)

var scSWSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("scenario-key-0123456789abcdef"))

// Invariant 4: arrival order never decides state. The cancellation (version
// 200) arrives before the older activation (version 100); the activation is
// recorded as stale and access stays closed. Fails without the version
// compare inside the projection upsert (the late "active" would overwrite).
func TestReversedArrivalOfVersionedSnapshotsKeepsNewest(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	r := scCBRes("sub_rev")
	now := time.Now().Unix()

	scPostCB(t, p, scCBEvent("ev_rev_cancel", "subscription_cancelled", r.ID, "cancelled", 200, now))
	p.WaitIdle()
	scPostCB(t, p, scCBEvent("ev_rev_active", "subscription_activated", r.ID, "active", 100, now-60))
	scPostCB(t, p, scCBEvent("ev_rev_changed", "subscription_changed", r.ID, "active", 150, now-30))
	p.WaitIdle()

	pr := scProjection(t, p, r)
	require.Equal(t, "cancelled", pr.Status)
	require.Equal(t, int64(200), *pr.Version)
	require.Equal(t, "ev_rev_cancel", pr.SourceEventID)

	for _, id := range []string{"ev_rev_active", "ev_rev_changed"} {
		row := scInbox(t, p, scCBKey(id))
		require.Equal(t, inbox.StatusProcessed, row.Status)
		require.NotNil(t, row.Outcome)
		require.Equal(t, projection.Stale, *row.Outcome)
		h := scHistoryOf(scHistory(t, p, r), id)
		require.Len(t, h, 1)
		require.Equal(t, projection.Stale, h[0].Outcome)
	}
	d := scAccess(t, p, r)
	require.False(t, d.Access, "a late active snapshot re-opened access: %+v", d)
	require.Equal(t, "canceled", d.Reason)
}

// Invariant 2 and the processor's half of it: three deliveries of one event
// make one inbox row and one applied write; an exact redelivery of the Kafka
// record (a relay crash after produce) is recognised as already handled and
// writes nothing. Fails without the "status != pending" skip in handle (the
// redelivery would be re-applied and recorded as a duplicate write).
func TestRepeatedDeliveriesAndRedeliveredRecordApplyOnce(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.Registerer = reg }})
	ctx := context.Background()
	r := scCBRes("sub_dup")

	body := scCBEvent("ev_dup", "subscription_changed", r.ID, "active", 10, time.Now().Unix())
	for range 3 {
		scPostCB(t, p, body)
	}
	p.WaitIdle()
	require.Equal(t, 1, scCount(t, p, `SELECT count(*) FROM webhook_inbox WHERE event_id = 'ev_dup'`))
	h := scHistory(t, p, r)
	require.Len(t, h, 1)
	require.Equal(t, projection.Applied, h[0].Outcome)
	before := scProjection(t, p, r)

	msg, err := json.Marshal(message.Message{Kind: message.KindEvent, Resource: r, EventID: "ev_dup",
		EventType: "subscription_changed", EndpointID: scCB, EnqueuedAt: time.Now().UTC(), Reason: message.ReasonWebhook})
	require.NoError(t, err)
	records := scCounterTotal(t, reg, "hookyard_processor_records_total")
	_, err = p.Pool.Exec(ctx, `INSERT INTO outbox (message_key, message) VALUES ($1, $2)`, r.Key(), string(msg))
	require.NoError(t, err)
	p.Eventually(func() bool {
		return scCounterTotal(t, reg, "hookyard_processor_records_total") == records+1
	}, "redelivered record consumed")
	scCounterReaches(t, reg, "hookyard_processor_events_total", "status", "already_handled", 1)

	after := scProjection(t, p, r)
	require.Equal(t, before.UpdatedAt, after.UpdatedAt, "the redelivery rewrote the projection")
	require.Equal(t, before.SourceEventID, after.SourceEventID)
	require.Len(t, scHistory(t, p, r), 1, "the redelivery left a history entry")
	scCounterReaches(t, reg, "hookyard_projection_outcomes_total", "outcome", projection.Applied, 1)
	require.Equal(t, float64(0), scCounter(t, reg, "hookyard_projection_outcomes_total", "outcome", projection.Duplicate))
	row := scInbox(t, p, scCBKey("ev_dup"))
	require.Equal(t, inbox.StatusProcessed, row.Status)
	require.Equal(t, 0, row.Attempts)
}

// Invariant 4: the provider's version orders events, not their timestamps.
// Two events in the same second (equal occurred_at), version 102 delivered
// before 101: 102 wins. Fails if the compare is removed or replaced by a
// timestamp comparison that lets equal times through.
func TestSameSecondEventsOrderedByVersion(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	r := scCBRes("sub_same_sec")
	at := time.Now().Unix()

	scPostCB(t, p, scCBEvent("ev_ss_102", "subscription_changed", r.ID, "non_renewing", 102, at))
	p.WaitIdle()
	scPostCB(t, p, scCBEvent("ev_ss_101", "subscription_changed", r.ID, "active", 101, at))
	p.WaitIdle()

	pr := scProjection(t, p, r)
	require.Equal(t, int64(102), *pr.Version)
	require.Equal(t, "non_renewing", pr.Status)
	require.Equal(t, projection.Stale, *scInbox(t, p, scCBKey("ev_ss_101")).Outcome)
}

// Invariant 4: a deletion leaves a tombstone with its version; an older
// snapshot delivered afterwards does not resurrect it, and access says
// "deleted". Fails if deletion removes the row (the older snapshot would be
// inserted) or if "_deleted" events stop setting the deleted flag.
func TestTombstoneOutlivesOlderSnapshot(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	r := scCBRes("sub_tomb")
	now := time.Now().Unix()

	scPostCB(t, p, scCBEvent("ev_tomb_v200", "subscription_created", r.ID, "active", 200, now-120))
	p.WaitIdle()
	scPostCB(t, p, scCBEvent("ev_tomb_del", "subscription_deleted", r.ID, "cancelled", 300, now))
	p.WaitIdle()
	scPostCB(t, p, scCBEvent("ev_tomb_old", "subscription_changed", r.ID, "active", 250, now-60))
	p.WaitIdle()

	pr := scProjection(t, p, r)
	require.True(t, pr.Deleted)
	require.Equal(t, int64(300), *pr.Version)
	require.Equal(t, projection.Stale, *scInbox(t, p, scCBKey("ev_tomb_old")).Outcome)
	d := scAccess(t, p, r)
	require.False(t, d.Access)
	require.Equal(t, "deleted", d.Reason)
}

// Invariant 4: two different snapshots with the same version are a conflict,
// not a last-writer-wins: the first stays, the second is recorded as
// "conflict" on its inbox row, in history and in the outcome metric. Fails if
// the upsert accepts equal versions (>= instead of >) or if conflicts are
// classified as duplicates.
func TestEqualVersionDifferentSnapshotIsConflict(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.Registerer = reg }})
	r := scCBRes("sub_conflict")
	now := time.Now().Unix()

	scPostCB(t, p, scCBEvent("ev_conf_1", "subscription_changed", r.ID, "active", 500, now))
	p.WaitIdle()
	scPostCB(t, p, scCBEvent("ev_conf_2", "subscription_changed", r.ID, "past_due", 500, now))
	p.WaitIdle()

	row := scInbox(t, p, scCBKey("ev_conf_2"))
	require.Equal(t, inbox.StatusProcessed, row.Status)
	require.Equal(t, projection.Conflict, *row.Outcome)
	h := scHistoryOf(scHistory(t, p, r), "ev_conf_2")
	require.Len(t, h, 1)
	require.Equal(t, projection.Conflict, h[0].Outcome)
	require.Equal(t, int64(500), *h[0].Version)

	pr := scProjection(t, p, r)
	require.Equal(t, "active", pr.Status)
	require.Equal(t, "ev_conf_1", pr.SourceEventID)
	scCounterReaches(t, reg, "hookyard_projection_outcomes_total", "outcome", projection.Conflict, 1)
}

// Invariant 4 for delta-carrying endpoints: on an Incremental endpoint,
// version 3 after 1 is a gap: not applied, recorded as "gap", the resource is
// marked needs_reconcile and the event is parked; once version 2 lands, the
// parked 3 applies on retry. The same sequence on a snapshot endpoint applies
// at once. Fails if the endpoint's Incremental option is not passed to the
// write, if the gap check is removed, or if a gap is marked processed (the
// delta would be lost).
func TestIncrementalEndpointGapIsParkedNotApplied(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	body := func(v int) []byte {
		return []byte(fmt.Sprintf(`{"type":"subscription.updated","data":{"id":"res_1","version":%d,"status":"active","seats":%d}}`, v, v))
	}
	inc := message.Resource{Provider: provider.StandardWebhooks, SourceAccount: scSWIncAc, Environment: "test", Type: "subscription", ID: "res_1"}
	snap := inc
	snap.SourceAccount = scSWAcct

	scPostSW(t, p, scSWInc, "msg_inc_1", body(1))
	scPostSW(t, p, scSW, "msg_snap_1", body(1))
	p.WaitIdle()
	scPostSW(t, p, scSWInc, "msg_inc_3", body(3))
	scPostSW(t, p, scSW, "msg_snap_3", body(3))
	p.WaitIdle()

	row := scInbox(t, p, inbox.Key{Provider: provider.StandardWebhooks, SourceAccount: scSWIncAc, Environment: "test", EventID: "msg_inc_3"})
	require.Equal(t, projection.Gap, *row.Outcome)
	require.NotEqual(t, inbox.StatusProcessed, row.Status, "a gap must stay parked, not be marked processed")
	pr := scProjection(t, p, inc)
	require.Equal(t, int64(1), *pr.Version, "a delta after a gap was applied")
	require.True(t, pr.NeedsReconcile)
	h := scHistoryOf(scHistory(t, p, inc), "msg_inc_3")
	require.NotEmpty(t, h)
	require.Equal(t, projection.Gap, h[0].Outcome)

	scPostSW(t, p, scSWInc, "msg_inc_2", body(2))
	p.Eventually(func() bool {
		pr := scProjection(t, p, inc)
		return pr.Version != nil && *pr.Version == 3 && !pr.NeedsReconcile
	}, "the parked version 3 applies after version 2")

	ps := scProjection(t, p, snap)
	require.Equal(t, int64(3), *ps.Version, "a snapshot endpoint applies any higher version")
	require.False(t, ps.NeedsReconcile)
}

// Invariant 5, cost side: hints carry no state, so several hints about one
// subscription in one polled batch cost one provider fetch. Fails if
// fetchAll stops de-duplicating by resource (5 fetches).
func TestHintsForOneResourceInABatchFetchOnce(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{NoProcessor: true})
	s := scSub("sub_batch", "active")
	p.Sim.Put(s)
	var ids []string
	for i := range 5 {
		if i == 4 {
			s.Status = "past_due"
			p.Sim.Put(s)
		}
		ids = append(ids, scSend(t, p, "customer.subscription.updated", s))
	}
	p.Eventually(func() bool {
		return scCount(t, p, `SELECT count(*) FROM outbox`) == 0
	}, "relay published the five events")
	require.Len(t, p.Records(5), 5)
	require.Equal(t, 5, scCount(t, p, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending'`))

	calls := p.Sim.APICalls()
	p.StartProcessor("batch", nil)
	p.WaitIdle()

	require.Equal(t, int64(1), p.Sim.APICalls()-calls, "five hints for one subscription in one batch")
	for _, id := range ids {
		row := scInbox(t, p, scStripeKey(id))
		require.Equal(t, inbox.StatusProcessed, row.Status)
		require.Equal(t, projection.Fetched, *row.Outcome)
	}
	require.Equal(t, "past_due", scProjection(t, p, pipelinetest.Resource(s.ID)).Status)
}

// Invariants 5 and 10: during a provider outage a hint is parked with its
// attempts, next attempt time and last error, the projection keeps its last
// known state (never "canceled"), and the breaker stops calling the
// provider. When the provider recovers, the retry sweeper brings the event
// back and the current state is written. Fails if a fetch error is turned
// into a state, if failures are not parked and retried, or without the
// breaker (every attempt would reach the API), or if the breaker's
// refusals are counted as attempts.
func TestProviderOutageParksHintsAndKeepsState(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.MaxAttempts = 1000 }})
	r := pipelinetest.Resource("sub_outage")
	s := scSub(r.ID, "active")
	p.Sim.Put(s)
	scSend(t, p, "customer.subscription.created", s)
	p.WaitIdle()
	before := scProjection(t, p, r)
	require.Equal(t, "active", before.Status)

	p.Sim.SetFailure(http.StatusInternalServerError)
	callsAtOutage := p.Sim.APICalls()
	hint := s
	hint.Status = "past_due"
	evID := scSend(t, p, "customer.subscription.updated", hint)
	k := scStripeKey(evID)

	var parked inbox.Row
	p.Eventually(func() bool {
		var err error
		parked, err = inbox.Get(context.Background(), p.Pool, k, false)
		return err == nil && (parked.Status == inbox.StatusRetrying && parked.NextAttemptAt != nil ||
			parked.Status == inbox.StatusProcessed || parked.Status == inbox.StatusDead)
	}, "event parked")
	require.Equal(t, inbox.StatusRetrying, parked.Status, "a failed fetch was not parked: %+v", parked)
	require.GreaterOrEqual(t, parked.Attempts, 1)
	require.NotNil(t, parked.LastError)
	require.Contains(t, *parked.LastError, "500")
	require.NotNil(t, parked.NextAttemptAt)
	p.Eventually(func() bool { return p.Stripe.BreakerState() == "open" }, "breaker opens")
	// Tries the open breaker refuses are retried but are not attempts: the
	// provider never saw them.
	p.Eventually(func() bool {
		row, err := inbox.Get(context.Background(), p.Pool, k, false)
		return err == nil && row.LastError != nil && strings.Contains(*row.LastError, provider.ErrNotAttempted.Error())
	}, "tries continue without reaching the provider")
	require.LessOrEqual(t, int64(scInbox(t, p, k).Attempts), p.Sim.APICalls()-callsAtOutage)

	during := scProjection(t, p, r)
	require.Equal(t, "active", during.Status, "a provider error changed the projection")
	require.False(t, during.Deleted)
	require.Equal(t, before.UpdatedAt, during.UpdatedAt)
	for _, e := range scHistory(t, p, r) {
		require.NotEqual(t, "canceled", e.Status)
	}
	require.False(t, strings.Contains(*scInbox(t, p, k).LastError, "canceled"))

	s.Status = "past_due"
	p.Sim.Put(s)
	p.Sim.SetFailure(0)
	row := scWaitStatus(t, p, k, inbox.StatusProcessed)
	require.Equal(t, projection.Fetched, *row.Outcome)
	require.GreaterOrEqual(t, row.Attempts, 1, "attempts are kept after success")
	require.Equal(t, "past_due", scProjection(t, p, r).Status)
}

// Invariant 5: an unexplained 404 never becomes "canceled": the hint fails
// (parked, then dead), no projection is created for an unknown subscription
// and an existing projection is left as it is. Fails if StripeFetcher maps
// a 404 to a canceled or deleted state.
func TestNotFoundNeverBecomesCanceled(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.MaxAttempts = 2 }})
	ctx := context.Background()

	// A projection for a subscription the provider no longer shows.
	gone := pipelinetest.Resource("sub_gone")
	_, err := p.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, state, status, fence_generation)
VALUES ($1, $2, $3, $4, $5, '{"id":"sub_gone","status":"active"}', 'active', 0)`, gone.Provider, gone.SourceAccount, gone.Environment, gone.Type, gone.ID)
	require.NoError(t, err)
	before := scProjection(t, p, gone)

	ghost := scSub("sub_ghost", "canceled")
	ghostEv := scSend(t, p, "customer.subscription.deleted", ghost)
	goneEv := scSend(t, p, "customer.subscription.deleted", scSub(gone.ID, "canceled"))

	for _, id := range []string{ghostEv, goneEv} {
		row := scWaitStatus(t, p, scStripeKey(id), inbox.StatusDead)
		require.Equal(t, 2, row.Attempts)
		require.NotNil(t, row.LastError)
		require.Contains(t, *row.LastError, "not found")
	}
	_, ok := p.Projection(pipelinetest.Resource(ghost.ID))
	require.False(t, ok, "a 404 created a projection")
	after := scProjection(t, p, gone)
	require.Equal(t, "active", after.Status)
	require.False(t, after.Deleted)
	require.Equal(t, before.UpdatedAt, after.UpdatedAt)
}

// Invariant 10: an exhausted event stays inspectable (dead, with attempts
// and error) and can be replayed; replaying an old "active" hint after the
// subscription was canceled is harmless because a hint re-fetches the
// current state. Fails if a hint writes its own (old) payload, or if dead
// events cannot be replayed.
func TestReplayOfDeadEventAfterCancelIsHarmless(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.MaxAttempts = 1 }})
	r := pipelinetest.Resource("sub_replay")
	s := scSub(r.ID, "active")
	p.Sim.Put(s)

	p.Sim.SetFailure(http.StatusInternalServerError)
	deadEv := scSend(t, p, "customer.subscription.updated", s)
	row := scWaitStatus(t, p, scStripeKey(deadEv), inbox.StatusDead)
	require.Equal(t, 1, row.Attempts)
	require.NotNil(t, row.LastError)
	_, ok := p.Projection(r)
	require.False(t, ok)

	p.Sim.SetFailure(0)
	s.Status, s.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(s)
	cancelEv := scSend(t, p, "customer.subscription.deleted", s)
	scWaitStatus(t, p, scStripeKey(cancelEv), inbox.StatusProcessed)
	require.Equal(t, "canceled", scProjection(t, p, r).Status)

	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/replay/event/stripe/%s/test/%s", p.Ops.URL, pipelinetest.StripeAccount, deadEv), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+pipelinetest.OpsToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	row = scWaitStatus(t, p, scStripeKey(deadEv), inbox.StatusProcessed)
	require.Equal(t, projection.Fetched, *row.Outcome)
	h := scHistoryOf(scHistory(t, p, r), deadEv)
	require.NotEmpty(t, h)
	require.Equal(t, "canceled", h[0].Status, "the replayed hint wrote something other than the current state")

	require.Equal(t, "canceled", scProjection(t, p, r).Status)
	d, code := p.Access(r.ID)
	require.Equal(t, http.StatusOK, code)
	require.False(t, d.Access, "replaying an old active event re-opened access: %+v", d)
	require.Equal(t, "canceled", d.Reason)
}

// Invariants 8 and 9: a paid invoice is a fact recorded by its own identity
// whatever the subscription's state (here canceled), and its receipt is an
// action recorded under a stable key; another event about the same invoice
// adds nothing. Fails if facts depend on the subscription's state, or if
// facts/actions are keyed by event instead of by invoice.
func TestInvoicePaidFactRecordedForCanceledSubscriptionOnce(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	s := scSub("sub_x", "canceled")
	s.CanceledAt = time.Now().Unix()
	p.Sim.Put(s)
	scSend(t, p, "customer.subscription.deleted", s)
	p.WaitIdle()
	require.Equal(t, "canceled", scProjection(t, p, pipelinetest.Resource("sub_x")).Status)

	inv := map[string]any{"id": "in_1", "object": "invoice", "subscription": "sub_x", "status": "paid"}
	first := scSend(t, p, "invoice.paid", inv)
	p.WaitIdle()
	require.Equal(t, inbox.StatusProcessed, scInbox(t, p, scStripeKey(first)).Status)

	facts := `SELECT count(*) FROM fact WHERE fact_type = 'invoice_paid' AND fact_id = 'in_1' AND resource_id = 'sub_x'`
	actions := `SELECT count(*) FROM action WHERE subject_id = 'in_1' AND kind = 'receipt'`
	require.Equal(t, 1, scCount(t, p, facts))
	require.Equal(t, 1, scCount(t, p, actions))
	require.Equal(t, 1, scCount(t, p, `SELECT count(*) FROM fact WHERE event_id = $1`, first))

	second := scSend(t, p, "invoice.paid", inv)
	p.WaitIdle()
	require.Equal(t, inbox.StatusProcessed, scInbox(t, p, scStripeKey(second)).Status)
	require.Equal(t, 1, scCount(t, p, `SELECT count(*) FROM fact`))
	require.Equal(t, 1, scCount(t, p, `SELECT count(*) FROM action`))
	require.Equal(t, "canceled", scProjection(t, p, pipelinetest.Resource("sub_x")).Status)
}

// Invariant 10 and the partition's liveness: an inbox row whose payload
// cannot be read goes dead at once (one attempt) with the reason, and the
// partition goes on: a valid event for the same resource right after it is
// applied. Fails if malformed events are retried like transient failures or
// if they fail the whole batch.
func TestMalformedPayloadGoesDeadAndPartitionContinues(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	ctx := context.Background()
	r := scCBRes("sub_mal")

	payload := `{"id":"ev_mal","event_type":"subscription_changed","content":{"subscription":{"id":"sub_mal","status":"active"}}}`
	msg, err := json.Marshal(message.Message{Kind: message.KindEvent, Resource: r, EventID: "ev_mal",
		EventType: "subscription_changed", EndpointID: scCB, EnqueuedAt: time.Now().UTC(), Reason: message.ReasonWebhook})
	require.NoError(t, err)
	tx, err := p.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id, payload)
VALUES ($1, $2, $3, 'ev_mal', $4, 'subscription_changed', 'subscription', $5, $6::jsonb)`,
		r.Provider, r.SourceAccount, r.Environment, scCB, r.ID, payload)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO outbox (message_key, message) VALUES ($1, $2)`, r.Key(), string(msg))
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	scPostCB(t, p, scCBEvent("ev_mal_next", "subscription_changed", r.ID, "active", 10, time.Now().Unix()))
	p.WaitIdle()

	row := scInbox(t, p, scCBKey("ev_mal"))
	require.Equal(t, inbox.StatusDead, row.Status)
	require.Equal(t, 1, row.Attempts, "a malformed event was retried")
	require.NotNil(t, row.LastError)
	require.Contains(t, *row.LastError, "malformed")

	next := scInbox(t, p, scCBKey("ev_mal_next"))
	require.Equal(t, inbox.StatusProcessed, next.Status)
	require.Equal(t, projection.Applied, *next.Outcome)
	pr := scProjection(t, p, r)
	require.Equal(t, int64(10), *pr.Version)
	require.Equal(t, "ev_mal_next", pr.SourceEventID)
}

// Partition fencing holds only while one resource maps to one partition: a
// processor whose topic has another partition count than the fenced one
// refuses to start. Fails if Run stops registering/comparing the count
// (Run would consume and return nil at the deadline).
func TestProcessorRefusesChangedPartitionCount(t *testing.T) {
	t.Parallel()
	// No other member: one in the same group would be handed a rebalance and
	// (rightly) refuse the changed count too.
	p := scNew(t, pipelinetest.Options{NoProcessor: true})
	ctx := context.Background()
	require.NoError(t, fence.Register(ctx, p.Pool, p.Kafka.Topic, 4))
	var n int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT partition_count FROM topic_fence WHERE topic = $1`, p.Kafka.Topic).Scan(&n))
	require.Equal(t, 4, n)
	_, err := p.Pool.Exec(ctx, `UPDATE topic_fence SET partition_count = $2 WHERE topic = $1`, p.Kafka.Topic, n+1)
	require.NoError(t, err)

	proc, err := processor.New(p.Pool, p.Log, p.ProcessorConfig("mismatch"))
	require.NoError(t, err)
	runCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = proc.Run(runCtx)
	require.ErrorIs(t, err, fence.ErrPartitionCountChanged)
	require.NoError(t, runCtx.Err(), "Run returned only because of the deadline")
}
