package stripesim_test

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
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
	// The paid invoice is retrievable, as Stripe's is: an endpoint that
	// projects invoices fetches it on the event.
	cl := stripe.NewClient(stripe.APIConfig{BaseURL: api.URL, APIKey: stripesim.DevAPIKey}, nil)
	got, err := cl.Get(t.Context(), "acct_1", "invoice", "in_1")
	require.NoError(t, err)
	require.Contains(t, string(got), `"status":"paid"`)

	resp, err := http.Post(api.URL+"/sim/subscriptions/sub_nope/cancel", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
}

func TestAPI(t *testing.T) {
	t.Parallel()
	sim, _, api := setup(t, "")
	sim.Put(stripesim.Subscription{ID: "sub_1", Customer: "cus_1", Status: "trialing", CurrentPeriodStart: 100, CurrentPeriodEnd: 200})

	get := func(path string) (int, map[string]any) { return call(t, api.URL, path, stripesim.DevAPIKey, "") }
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
		"param": "id", "doc_url": "https://stripe.com/docs/error-codes/resource-missing",
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

// call sends GET path with an optional API key and Stripe-Account header
// and decodes the JSON answer.
func call(t *testing.T, base, path, key, account string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	require.NoError(t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if account != "" {
		req.Header.Set("Stripe-Account", account)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

// Stripe answers 401 to a request without a key or with a key it does not
// know; the simulator must too, or a fetcher sending the wrong key (or none)
// passes every test.
func TestUnknownAPIKeyIsUnauthorized(t *testing.T) {
	t.Parallel()
	sim, _, api := setup(t, "")
	sim.Put(stripesim.Subscription{ID: "sub_1", Status: "active"})
	for _, key := range []string{"", "sk_test_nobody"} {
		status, body := call(t, api.URL, "/v1/subscriptions/sub_1", key, "")
		require.Equal(t, http.StatusUnauthorized, status, "key %q", key)
		require.Equal(t, "invalid_request_error", body["error"].(map[string]any)["type"])
		status, _ = call(t, api.URL, "/v1/subscriptions", key, "")
		require.Equal(t, http.StatusUnauthorized, status, "key %q", key)
	}
	status, _ := call(t, api.URL, "/v1/subscriptions/sub_1", stripesim.DevAPIKey, "")
	require.Equal(t, http.StatusOK, status)
}

// Each API key reads its own account's objects, in its own mode; the same id
// can name different objects in two accounts. A platform key with
// Stripe-Account reads a connected account's objects, and is refused (403)
// for an account that is not connected to it.
func TestObjectsBelongToTheKeysAccountAndMode(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{Keys: map[string]string{
		"sk_test_a": "acct_a", "sk_live_a": "acct_a", "sk_test_b": "acct_b", "sk_test_platform": "acct_platform"}})
	api := httptest.NewServer(sim)
	t.Cleanup(api.Close)
	sim.Connect("acct_platform", "acct_connected")
	sim.PutFor("acct_a", stripesim.Subscription{ID: "sub_same", Status: "active"})
	sim.PutFor("acct_a", stripesim.Subscription{ID: "sub_same", Status: "past_due", Livemode: true})
	sim.PutFor("acct_b", stripesim.Subscription{ID: "sub_same", Status: "canceled"})
	sim.PutFor("acct_connected", stripesim.Subscription{ID: "sub_same", Status: "trialing"})

	for _, c := range []struct {
		key, account, status string
		live                 bool
	}{
		{"sk_test_a", "", "active", false},
		{"sk_live_a", "", "past_due", true},
		{"sk_test_b", "", "canceled", false},
		{"sk_test_platform", "acct_connected", "trialing", false},
	} {
		status, sub := call(t, api.URL, "/v1/subscriptions/sub_same", c.key, c.account)
		require.Equal(t, http.StatusOK, status, "%s as %q", c.key, c.account)
		require.Equal(t, c.status, sub["status"], "%s as %q", c.key, c.account)
		require.Equal(t, c.live, sub["livemode"], "%s as %q", c.key, c.account)
	}
	status, _ := call(t, api.URL, "/v1/subscriptions/sub_same", "sk_test_platform", "")
	require.Equal(t, http.StatusNotFound, status, "the platform's own account holds no sub_same")
	status, body := call(t, api.URL, "/v1/subscriptions/sub_same", "sk_test_a", "acct_connected")
	require.Equal(t, http.StatusForbidden, status, "acct_a is no platform of acct_connected")
	require.Contains(t, body["error"].(map[string]any)["message"], "does not have access to account 'acct_connected'")

	got, ok := sim.GetFor("acct_b", false, "sub_same")
	require.True(t, ok)
	require.Equal(t, "canceled", got.Status)
	_, ok = sim.GetFor("acct_b", true, "sub_same")
	require.False(t, ok)
}

func listIDs(t *testing.T, api, query string) ([]string, bool) {
	t.Helper()
	status, page := call(t, api, "/v1/subscriptions"+query, stripesim.DevAPIKey, "")
	require.Equal(t, http.StatusOK, status, "%v", page)
	var ids []string
	for _, d := range page["data"].([]any) {
		ids = append(ids, d.(map[string]any)["id"].(string))
	}
	return ids, page["has_more"].(bool)
}

// Stripe's list leaves canceled subscriptions out unless status=all (or
// status=canceled) is asked for: "If no value is supplied, all
// subscriptions that have not been canceled are returned."
func TestListLeavesCanceledOutUnlessStatusAll(t *testing.T) {
	t.Parallel()
	sim, _, api := setup(t, "")
	sim.Put(stripesim.Subscription{ID: "sub_active", Status: "active", Created: 100})
	sim.Put(stripesim.Subscription{ID: "sub_canceled", Status: "canceled", Created: 200})
	sim.Put(stripesim.Subscription{ID: "sub_expired", Status: "incomplete_expired", Created: 300})

	ids, _ := listIDs(t, api.URL, "")
	require.Equal(t, []string{"sub_expired", "sub_active"}, ids)
	ids, _ = listIDs(t, api.URL, "?status=all")
	require.Equal(t, []string{"sub_expired", "sub_canceled", "sub_active"}, ids)
	ids, _ = listIDs(t, api.URL, "?status=canceled")
	require.Equal(t, []string{"sub_canceled"}, ids)
	ids, _ = listIDs(t, api.URL, "?status=ended")
	require.Equal(t, []string{"sub_expired", "sub_canceled"}, ids)
	status, _ := call(t, api.URL, "/v1/subscriptions?status=bogus", stripesim.DevAPIKey, "")
	require.Equal(t, http.StatusBadRequest, status)
}

// Lists come newest first and page with starting_after and has_more; limit
// is 1 to 100.
func TestListPagesNewestFirst(t *testing.T) {
	t.Parallel()
	sim, _, api := setup(t, "")
	for i := range 5 {
		sim.Put(stripesim.Subscription{ID: fmt.Sprintf("sub_%d", i), Status: "active", Created: int64(1000 + i)})
	}
	ids, more := listIDs(t, api.URL, "?limit=2")
	require.Equal(t, []string{"sub_4", "sub_3"}, ids)
	require.True(t, more)
	ids, more = listIDs(t, api.URL, "?limit=2&starting_after=sub_3")
	require.Equal(t, []string{"sub_2", "sub_1"}, ids)
	require.True(t, more)
	ids, more = listIDs(t, api.URL, "?limit=2&starting_after=sub_1")
	require.Equal(t, []string{"sub_0"}, ids)
	require.False(t, more)
	for _, q := range []string{"?limit=101", "?limit=0", "?starting_after=sub_nope"} {
		status, _ := call(t, api.URL, "/v1/subscriptions"+q, stripesim.DevAPIKey, "")
		require.Equal(t, http.StatusBadRequest, status, q)
	}
}
