package stripesim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// objectTypes are the objects the Stripe client can fetch, with the id
// prefix Stripe gives each.
var objectTypes = map[string]string{
	"subscription": "sub_", "customer": "cus_", "invoice": "in_",
	"payment_intent": "pi_", "charge": "ch_", "price": "price_", "product": "prod_",
}

// The fetch path (stripe.Fetcher → Client → GET /v1/<objects>/<id>) works
// for every object type the client lists, against a simulator that
// answers like Stripe: the object with id, object and livemode; 404 with
// Stripe's error JSON (invalid_request_error, resource_missing) for an
// unknown id, which the fetcher reports as provider.ErrNotFound, never a
// state. Fails if the client has no path for a type, or the simulator
// answers one differently from Stripe.
func TestFetchReadsEveryObjectTypeAsStripeAnswersIt(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	f := stripe.Fetcher{Client: stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: stripesim.DevAPIKey}, nil)}
	res := func(typ, id string) message.Resource {
		return message.Resource{Provider: provider.Stripe, SourceAccount: stripesim.DevAccount, Environment: "test", Type: typ, ID: id}
	}
	for typ, prefix := range objectTypes {
		id := sim.PutObject(typ, map[string]any{"metadata": map[string]any{"k": "v"}})
		require.Regexp(t, "^"+prefix, id, typ)
		got, err := f.Fetch(t.Context(), res(typ, id))
		require.NoError(t, err, typ)
		require.False(t, got.Deleted, typ)
		var obj map[string]any
		require.NoError(t, json.Unmarshal(got.State, &obj), typ)
		require.Equal(t, id, obj["id"], typ)
		require.Equal(t, typ, obj["object"], typ)
		require.Equal(t, false, obj["livemode"], typ)
		require.Equal(t, map[string]any{"k": "v"}, obj["metadata"], typ)

		_, err = f.Fetch(t.Context(), res(typ, prefix+"missing"))
		require.ErrorIs(t, err, provider.ErrNotFound, typ)
		require.Equal(t, "resource_missing", stripe.ErrorCode(err), typ)
	}
}

// Stripe's answer for an id it does not know, on the wire.
func TestUnknownObjectIsStripesResourceMissingError(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/payment_intents/pi_missing", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+stripesim.DevAPIKey)
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)
	var body struct {
		Error map[string]any `json:"error"`
	}
	require.NoError(t, json.Unmarshal(raw, &body))
	require.Equal(t, "invalid_request_error", body.Error["type"])
	require.Equal(t, "resource_missing", body.Error["code"])
	require.Equal(t, "id", body.Error["param"])
	require.Equal(t, "No such payment_intent: 'pi_missing'", body.Error["message"])
}

// A deleted customer is still retrievable: Stripe answers 200 with
// {"id", "object": "customer", "deleted": true}
// (https://docs.stripe.com/api/customers/delete,
// https://docs.stripe.com/api/customers/retrieve: "a subset of the
// customer's information is returned, including a deleted property that's
// set to true"). The fetcher reads it as a deletion, not a 404 and not a
// live customer. Fails if the simulator forgets the customer (404) or
// keeps answering the whole object.
func TestDeletedCustomerIsRetrievableAsDeleted(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	f := stripe.Fetcher{Client: stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: stripesim.DevAPIKey}, nil)}
	id := sim.PutObject("customer", map[string]any{"email": "jenny@example.com"})
	require.True(t, sim.DeleteCustomer(id))
	require.False(t, sim.DeleteCustomer("cus_missing"))
	got, err := f.Fetch(t.Context(), message.Resource{Provider: provider.Stripe, SourceAccount: stripesim.DevAccount,
		Environment: "test", Type: "customer", ID: id})
	require.NoError(t, err)
	require.True(t, got.Deleted)
	require.JSONEq(t, `{"id":"`+id+`","object":"customer","deleted":true}`, string(got.State))
}
