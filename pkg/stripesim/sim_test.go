package stripesim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/stripesim"
)

const secret = "whsec_test"

type delivery struct {
	header http.Header
	body   []byte
}

// receiver records deliveries and answers status.
type receiver struct {
	mu     sync.Mutex
	got    []delivery
	status int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, delivery{r.Header.Clone(), body})
	status := rc.status
	rc.mu.Unlock()
	w.WriteHeader(status)
}

func (rc *receiver) last(t *testing.T) delivery {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	require.NotEmpty(t, rc.got)
	return rc.got[len(rc.got)-1]
}

func setup(t *testing.T, account string) (*stripesim.Sim, *receiver, *httptest.Server) {
	t.Helper()
	rc := &receiver{status: http.StatusOK}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	sim := stripesim.New(stripesim.Config{WebhookURL: hook.URL, WebhookSecret: secret, Account: account})
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	return sim, rc, api
}

func TestSendSignature(t *testing.T) {
	t.Parallel()
	sim, rc, _ := setup(t, "")
	rc.status = http.StatusAccepted
	sim.Put(stripesim.Subscription{ID: "sub_1", Customer: "cus_1", Status: "active"})
	sub, ok := sim.Get("sub_1")
	require.True(t, ok)

	id, status, err := sim.Send(t.Context(), "customer.subscription.updated", sub)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status)

	d := rc.last(t)
	require.Equal(t, "application/json", d.header.Get("Content-Type"))
	require.NoError(t, webhook.ValidatePayload(d.body, d.header.Get("Stripe-Signature"), secret))
	require.Error(t, webhook.ValidatePayload(d.body, d.header.Get("Stripe-Signature"), "whsec_other"))

	var ev map[string]any
	require.NoError(t, json.Unmarshal(d.body, &ev))
	require.Equal(t, id, ev["id"])
	require.Equal(t, "event", ev["object"])
	require.Equal(t, stripesim.APIVersion, ev["api_version"])
	require.Equal(t, false, ev["livemode"])
	require.NotContains(t, ev, "account")
	obj := ev["data"].(map[string]any)["object"].(map[string]any)
	require.Equal(t, "sub_1", obj["id"])

	// The project's verifier accepts it and names the subscription.
	ep := &provider.Endpoint{SourceAccount: "acct_platform", Environment: "test", Secrets: []string{secret}}
	pe, err := stripe.Verifier{}.Verify(ep, d.header, d.body, time.Now())
	require.NoError(t, err)
	require.Equal(t, "subscription", pe.ResourceType)
	require.Equal(t, "sub_1", pe.ResourceID)
}

func TestEventAccount(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{Account: "acct_1"})
	id, body := sim.Event("invoice.paid", map[string]any{"id": "in_1", "object": "invoice"})
	var ev map[string]any
	require.NoError(t, json.Unmarshal(body, &ev))
	require.Equal(t, "acct_1", ev["account"])
	require.Equal(t, id, ev["id"])
	require.Regexp(t, `^evt_[a-z0-9]+$`, id)
}

func post(t *testing.T, url string, in any) map[string]any {
	t.Helper()
	b, err := json.Marshal(in)
	require.NoError(t, err)
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

func eventOf(t *testing.T, d delivery) (string, map[string]any) {
	t.Helper()
	require.NoError(t, webhook.ValidatePayload(d.body, d.header.Get("Stripe-Signature"), secret))
	var ev struct {
		Type string `json:"type"`
		Data struct {
			Object map[string]any `json:"object"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(d.body, &ev))
	return ev.Type, ev.Data.Object
}

func TestControlEndpoints(t *testing.T) {
	t.Parallel()
	sim, rc, api := setup(t, "acct_1")

	out := post(t, api.URL+"/sim/subscriptions", map[string]any{"customer": "cus_1"})
	require.EqualValues(t, http.StatusOK, out["delivery_status"])
	id := out["subscription"].(map[string]any)["id"].(string)
	typ, obj := eventOf(t, rc.last(t))
	require.Equal(t, "customer.subscription.created", typ)
	require.Equal(t, id, obj["id"])
	require.Equal(t, "active", obj["status"])

	rc.mu.Lock()
	rc.status = http.StatusServiceUnavailable
	rc.mu.Unlock()
	out = post(t, api.URL+"/sim/subscriptions", map[string]any{"id": id, "status": "past_due"})
	require.EqualValues(t, http.StatusServiceUnavailable, out["delivery_status"])
	typ, obj = eventOf(t, rc.last(t))
	require.Equal(t, "customer.subscription.updated", typ)
	require.Equal(t, "past_due", obj["status"])
	require.Equal(t, "cus_1", obj["customer"])

	post(t, api.URL+"/sim/subscriptions/"+id+"/cancel", map[string]any{"at_period_end": true})
	typ, obj = eventOf(t, rc.last(t))
	require.Equal(t, "customer.subscription.updated", typ)
	require.Equal(t, true, obj["cancel_at_period_end"])

	post(t, api.URL+"/sim/subscriptions/"+id+"/cancel", map[string]any{})
	typ, obj = eventOf(t, rc.last(t))
	require.Equal(t, "customer.subscription.deleted", typ)
	require.Equal(t, "canceled", obj["status"])
	sub, ok := sim.Get(id)
	require.True(t, ok)
	require.NotZero(t, sub.CanceledAt)

	out = post(t, api.URL+"/sim/invoices/in_1/pay", map[string]any{"subscription": id, "amount_paid": 1000})
	require.NotEmpty(t, out["event_id"])
	d := rc.last(t)
	typ, obj = eventOf(t, d)
	require.Equal(t, "invoice.paid", typ)
	require.Equal(t, "in_1", obj["id"])
	require.Equal(t, "invoice", obj["object"])
	require.Equal(t, id, obj["subscription"])
	require.Equal(t, "paid", obj["status"])
	require.EqualValues(t, 1000, obj["amount_paid"])
	ep := &provider.Endpoint{SourceAccount: "acct_1", Environment: "test", Secrets: []string{secret}}
	pe, err := stripe.Verifier{}.Verify(ep, d.header, d.body, time.Now())
	require.NoError(t, err)
	require.Equal(t, id, pe.ResourceID)

	resp, err := http.Post(api.URL+"/sim/subscriptions/sub_nope/cancel", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestAPI(t *testing.T) {
	t.Parallel()
	sim, _, api := setup(t, "")
	sim.Put(stripesim.Subscription{ID: "sub_1", Customer: "cus_1", Status: "trialing", CurrentPeriodStart: 100, CurrentPeriodEnd: 200})

	get := func(path string) (int, map[string]any) {
		resp, err := http.Get(api.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	status, sub := get("/v1/subscriptions/sub_1")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "trialing", sub["status"])
	require.Equal(t, false, sub["livemode"])
	items := sub["items"].(map[string]any)
	require.Equal(t, "list", items["object"])
	item := items["data"].([]any)[0].(map[string]any)
	require.EqualValues(t, 200, item["current_period_end"])
	require.EqualValues(t, 100, item["current_period_start"])

	status, body := get("/v1/subscriptions/sub_x")
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, map[string]any{"error": map[string]any{
		"type": "invalid_request_error", "code": "resource_missing", "message": "No such subscription: 'sub_x'",
	}}, body)

	sim.SetFailure(http.StatusBadGateway)
	status, body = get("/v1/subscriptions/sub_1")
	require.Equal(t, http.StatusBadGateway, status)
	require.Equal(t, "api_error", body["error"].(map[string]any)["type"])
	sim.SetFailure(0)

	_, stats := get("/sim/stats")
	require.EqualValues(t, 3, stats["api_calls"])
	require.EqualValues(t, 3, sim.APICalls())
}
