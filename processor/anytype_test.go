package processor_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/processor"
)

// A Standard Webhooks endpoint whose events name their resource's type
// (data.object) and version (data.version): every type is projected.
const (
	atSW     = "sw-any"
	atSWAcct = "sender-any"
)

func atEndpoints() []provider.Endpoint {
	return []provider.Endpoint{{ID: atSW, Provider: provider.StandardWebhooks, SourceAccount: atSWAcct, Environment: "test",
		Secrets: []string{scSWSecret},
		Paths:   provider.Paths{ResourceID: "data.id", ResourceType: "data.object", Version: "data.version", State: "data"}}}
}

// delivery is one signed POST to an endpoint.
type delivery struct {
	endpoint string
	body     []byte
	header   http.Header
}

func stripeDelivery(body []byte) delivery {
	h := http.Header{}
	h.Set(stripe.SignatureHeader, stripe.Sign(body, pipelinetest.StripeSecret, time.Now()))
	return delivery{pipelinetest.StripeEndpoint, body, h}
}

// postChaos delivers ds in reverse order, each one twice, all at once from
// as many goroutines: arrival order, repetition and concurrency are all
// the network's, none the provider's.
func postChaos(t *testing.T, p *pipelinetest.Pipeline, ds []delivery) {
	t.Helper()
	var all []delivery
	for i := len(ds) - 1; i >= 0; i-- {
		all = append(all, ds[i], ds[i])
	}
	start := make(chan struct{})
	errs := make(chan error, len(all))
	var wg sync.WaitGroup
	for _, d := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, err := http.NewRequest(http.MethodPost, p.Receiver.URL+"/webhooks/"+d.endpoint, strings.NewReader(string(d.body)))
			if err != nil {
				errs <- err
				return
			}
			req.Header = d.header.Clone()
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("delivery to %s answered %d", d.endpoint, resp.StatusCode)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// stateOf reads a projection's kept state.
func stateOf(t *testing.T, pr projection.Projection) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(pr.State, &m))
	return m
}

// apiProjection asks the query API for any resource's projection.
func apiProjection(t *testing.T, p *pipelinetest.Pipeline, r message.Resource) (int, projection.Projection) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/projections/%s/%s/%s/%s/%s",
		p.Ops.URL, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+pipelinetest.OpsToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out struct {
		Projection projection.Projection `json:"projection"`
	}
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	}
	return resp.StatusCode, out.Projection
}

// Invariants 4 and 5 for a Stripe customer, a type Stripe sends no version
// for: created, two updates, then a deletion and a late stale update,
// delivered reversed, twice each, concurrently. Every event is a hint, so
// the projection is what Stripe answers now: the last tier, then the
// tombstone Stripe returns for a deleted customer ({"deleted": true}),
// which a late "updated" cannot undo. The customer's e-mail is never kept.
// Fails if a Stripe customer event is not fetched (no projection), if a
// hint writes its own payload (a stale tier), or if the tombstone is not a
// deletion.
func TestStripeCustomerProjectedByFetchThroughArrivalChaos(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{StripeProject: []string{"subscription", "customer"},
		Processor: func(c *processor.Config) { c.StateFields = []string{"metadata.tier"} }})
	cus := func(id, tier string) map[string]any {
		return map[string]any{"id": id, "object": "customer", "email": "jenny@example.com", "metadata": map[string]any{"tier": tier}}
	}
	id := p.Sim.PutObject("customer", cus("", "free"))
	r := message.Resource{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test", Type: "customer", ID: id}

	var first []delivery
	for _, e := range []struct{ typ, tier string }{{"customer.created", "free"}, {"customer.updated", "pro"}, {"customer.updated", "team"}} {
		_, body := p.Sim.Emit(e.typ, cus(id, e.tier))
		first = append(first, stripeDelivery(body))
	}
	p.Sim.PutObject("customer", cus(id, "team"))
	postChaos(t, p, first)
	p.WaitIdle()
	pr := scProjection(t, p, r)
	require.False(t, pr.Deleted)
	require.Equal(t, map[string]any{"tier": "team"}, stateOf(t, pr)["metadata"])
	require.NotContains(t, string(pr.State), "jenny", "a customer's e-mail is not a decision's field")

	require.True(t, p.Sim.DeleteCustomer(id))
	deleted := cus(id, "team")
	deleted["deleted"] = true
	_, del := p.Sim.Emit("customer.deleted", deleted)
	_, late := p.Sim.Emit("customer.updated", cus(id, "pro"))
	postChaos(t, p, []delivery{stripeDelivery(del), stripeDelivery(late), first[0]})
	p.WaitIdle()

	pr = scProjection(t, p, r)
	require.True(t, pr.Deleted, "Stripe's deleted customer is a tombstone")
	require.JSONEq(t, `{"id":"`+id+`","object":"customer","deleted":true}`, string(pr.State))
	require.Zero(t, scCount(t, p, `SELECT count(*) FROM webhook_inbox WHERE status <> 'processed'`))
	require.Equal(t, 5, scCount(t, p, `SELECT count(*) FROM webhook_inbox`), "each event once, whatever its copies")

	code, got := apiProjection(t, p, r)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "customer", got.Resource.Type)
	require.True(t, got.Deleted)
}

// Invariant 5 for a type other than subscriptions: a 404 for a customer
// that never existed is unexplained (Stripe answers a deleted customer with
// 200 and "deleted": true, never 404), so it is parked, retried and dead,
// and never becomes a tombstone or any projection. Fails if a 404 is read
// as a deletion for customers.
func TestStripeCustomerNotFoundNeverBecomesATombstone(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{StripeProject: []string{"customer"},
		Processor: func(c *processor.Config) { c.MaxAttempts = 2 }})
	evID := scSend(t, p, "customer.deleted", map[string]any{"id": "cus_ghost", "object": "customer", "deleted": true})
	row := scWaitStatus(t, p, scStripeKey(evID), inbox.StatusDead)
	require.NotNil(t, row.LastError)
	require.Contains(t, *row.LastError, "not found")
	_, ok := p.Projection(message.Resource{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount,
		Environment: "test", Type: "customer", ID: "cus_ghost"})
	require.False(t, ok, "a 404 created a projection")
}

// The default project of a Stripe endpoint is subscriptions: an event
// about a customer is stored and processed as recorded, with no API call
// and no projection. Fails if the processor fetches every type.
func TestStripeEventOfAnUnprojectedTypeIsRecordedWithoutAFetch(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	id := p.Sim.PutObject("customer", map[string]any{"metadata": map[string]any{"tier": "free"}})
	calls := p.Sim.APICalls()
	evID := scSend(t, p, "customer.updated", map[string]any{"id": id, "object": "customer"})
	row := scWaitStatus(t, p, scStripeKey(evID), inbox.StatusProcessed)
	require.Equal(t, projection.Recorded, *row.Outcome)
	require.Equal(t, calls, p.Sim.APICalls(), "an unprojected type was fetched")
	_, ok := p.Projection(message.Resource{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount,
		Environment: "test", Type: "customer", ID: id})
	require.False(t, ok)
}

// The fetch path through the whole pipeline, for every object type the
// Stripe client retrieves: an event about it (its own type, e.g. an invoice
// with no subscription) on an endpoint projecting every type is fetched
// from the simulator and written, and the query API answers it. Fails if a
// type is left out of the client's paths or hard-coded out of projection.
func TestEveryFetchableStripeTypeIsProjected(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{StripeProject: stripe.FetchableTypes()})
	for _, typ := range stripe.FetchableTypes() {
		if typ == "subscription" {
			continue // the scenarios above and scenarios_test.go
		}
		id := p.Sim.PutObject(typ, map[string]any{"status": "current_" + typ})
		scSend(t, p, typ+".updated", map[string]any{"id": id, "object": typ, "status": "stale"})
		p.WaitIdle()
		r := message.Resource{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test", Type: typ, ID: id}
		pr := scProjection(t, p, r)
		require.Equal(t, "current_"+typ, pr.Status, typ)
		require.Equal(t, typ, stateOf(t, pr)["object"], typ)
		code, got := apiProjection(t, p, r)
		require.Equal(t, http.StatusOK, code, typ)
		require.Equal(t, "current_"+typ, got.Status, typ)
	}
}

// Invariant 4 for a Chargebee customer: versioned snapshots (its
// resource_version) of a customer, ending in its deletion, delivered
// reversed, twice each, concurrently: the projection is the tombstone at
// the last version, the older snapshots stale. Fails without the version
// compare in the projection upsert, or if customers are not projected.
func TestChargebeeCustomerProjectedByVersionThroughArrivalChaos(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	h := http.Header{}
	h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth("u", "p"))
	now := time.Now().Unix()
	var ds []delivery
	for i, typ := range []string{"customer_created", "customer_changed", "customer_changed", "customer_deleted"} {
		v := int64(1000 + 100*i)
		body, err := json.Marshal(map[string]any{
			"id": fmt.Sprintf("ev_cus_%d", i), "event_type": typ, "occurred_at": now - int64(10-i), "api_version": "v2", "object": "event",
			"content": map[string]any{"customer": map[string]any{
				"id": "cus_cb", "resource_version": v, "deleted": typ == "customer_deleted", "auto_collection": "on",
			}},
		})
		require.NoError(t, err)
		ds = append(ds, delivery{scCB, body, h})
	}
	postChaos(t, p, ds)
	p.WaitIdle()

	r := message.Resource{Provider: provider.Chargebee, SourceAccount: scCBSite, Environment: "test", Type: "customer", ID: "cus_cb"}
	pr := scProjection(t, p, r)
	require.True(t, pr.Deleted)
	require.Equal(t, int64(1300), *pr.Version)
	require.Equal(t, "ev_cus_3", pr.SourceEventID)
	require.Equal(t, 4, scCount(t, p, `SELECT count(*) FROM webhook_inbox WHERE provider = 'chargebee' AND status = 'processed'`))
	code, got := apiProjection(t, p, r)
	require.Equal(t, http.StatusOK, code)
	require.True(t, got.Deleted)
}

// Invariant 4 for a Standard Webhooks resource that is not a subscription
// (a "contact", its type read at data.object, its version at
// data.version): snapshots delivered reversed, twice each, concurrently
// leave the highest version's. Fails without the version compare, or if
// the type is not taken from the event.
func TestStandardWebhooksContactProjectedByVersionThroughArrivalChaos(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Endpoints: atEndpoints()})
	var ds []delivery
	for i, status := range []string{"new", "active", "inactive"} {
		msgID := fmt.Sprintf("msg_contact_%d", i)
		body, err := json.Marshal(map[string]any{"type": "contact.updated", "timestamp": time.Now().UTC().Format(time.RFC3339),
			"data": map[string]any{"id": "c_1", "object": "contact", "version": i + 1, "status": status}})
		require.NoError(t, err)
		h, err := standardwebhooks.Sign(scSWSecret, msgID, time.Now(), body)
		require.NoError(t, err)
		ds = append(ds, delivery{atSW, body, h})
	}
	postChaos(t, p, ds)
	p.WaitIdle()

	r := message.Resource{Provider: provider.StandardWebhooks, SourceAccount: atSWAcct, Environment: "test", Type: "contact", ID: "c_1"}
	pr := scProjection(t, p, r)
	require.Equal(t, "inactive", pr.Status)
	require.Equal(t, int64(3), *pr.Version)
	code, got := apiProjection(t, p, r)
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "inactive", got.Status)
}
