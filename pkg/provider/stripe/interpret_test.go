package stripe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

func TestInterpret(t *testing.T) {
	t.Parallel()
	got, err := Provider{}.Interpret(provider.StoredEvent{EventType: "customer.subscription.updated", ResourceType: "subscription", ResourceID: "sub_1",
		Payload: []byte(`{"data":{"object":{"id":"sub_1","status":"active"}}}`)}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.Plan{Fetch: true}, got, "Stripe sends no version: a hint")

	inv := `{"id":"in_1","subscription":"sub_1"}`
	got, err = Provider{}.Interpret(provider.StoredEvent{EventType: "invoice.paid", ResourceType: "subscription", ResourceID: "sub_1",
		Payload: []byte(`{"data":{"object":` + inv + `}}`)}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.Plan{Fetch: true}, got, "the invoice_paid fact is declared (package fact), not coded here")
	require.Equal(t, "data.object", Provider{}.FactObject(provider.StoredEvent{}))

	_, err = Provider{}.Interpret(provider.StoredEvent{Payload: []byte(`{`)}, nil)
	require.ErrorIs(t, err, provider.ErrMalformed)
}

// Which types a Stripe endpoint projects is its `project`: by default
// subscriptions only, so an event about a customer is recorded and costs no
// API call; an endpoint that projects customers and invoices fetches them.
// A type the client has no path for is never a fetch, whatever the config
// says. Fails if the type gate is removed (every event would fetch) or if
// it ignores the endpoint's list.
func TestInterpretFetchesOnlyProjectedTypes(t *testing.T) {
	t.Parallel()
	ev := func(typ, id string) provider.StoredEvent {
		return provider.StoredEvent{EventType: typ + ".updated", ResourceType: typ, ResourceID: id,
			Payload: []byte(`{"data":{"object":{"id":"` + id + `","object":"` + typ + `"}}}`)}
	}
	plain := &provider.Endpoint{Provider: provider.Stripe}
	wide := &provider.Endpoint{Provider: provider.Stripe, Project: []string{"subscription", "customer", "invoice"}}
	only := &provider.Endpoint{Provider: provider.Stripe, Project: []string{"customer"}}
	for _, c := range []struct {
		ep    *provider.Endpoint
		typ   string
		fetch bool
	}{
		{nil, "subscription", true}, {nil, "customer", false},
		{plain, "subscription", true}, {plain, "customer", false}, {plain, "invoice", false},
		{wide, "subscription", true}, {wide, "customer", true}, {wide, "invoice", true}, {wide, "charge", false},
		{only, "subscription", false}, {only, "customer", true},
		{&provider.Endpoint{Project: []string{"discount"}}, "discount", false},
	} {
		got, err := Provider{}.Interpret(ev(c.typ, "x_1"), c.ep)
		require.NoError(t, err)
		require.Equal(t, c.fetch, got.Fetch, "%s on %+v", c.typ, c.ep)
	}
}

// A Stripe endpoint may only project what the client can fetch: a type
// without an API path would fail every event of its type.
func TestProjectOfAnUnfetchableTypeIsRefused(t *testing.T) {
	t.Parallel()
	ep := &provider.Endpoint{Provider: provider.Stripe, SourceAccount: "acct_1", Environment: "test",
		Project: []string{"customer", "discount", "payment_intent"}}
	errs := Provider{}.CheckEndpoint(ep)
	require.Len(t, errs, 1)
	require.Contains(t, errs[0].Error(), `project[1] "discount"`)
	require.Empty(t, Provider{}.CheckEndpoint(&provider.Endpoint{Provider: provider.Stripe, Environment: "test",
		Project: FetchableTypes()}))
}

// An invoice of a subscription (either way Stripe names it) on an endpoint
// that projects invoices is the invoice's event: keyed by the invoice,
// fetched as the invoice, with its subscription to refresh on its own key.
// Where invoices are not projected it stays the subscription's event, as
// before. An invoice without a subscription refreshes nothing, and an
// endpoint that does not project subscriptions refreshes none. Fails if an
// invoice of a subscription is keyed by the subscription where invoices
// are projected, or if its subscription is no longer refreshed.
func TestInvoiceOfASubscriptionIsKeyedByItselfWhereInvoicesAreProjected(t *testing.T) {
	t.Parallel()
	wide := &provider.Endpoint{Provider: provider.Stripe, SourceAccount: "acct_1", Environment: "test",
		Project: []string{"subscription", "customer", "invoice"}}
	plain := &provider.Endpoint{Provider: provider.Stripe, SourceAccount: "acct_1", Environment: "test"}
	invoicesOnly := &provider.Endpoint{Provider: provider.Stripe, SourceAccount: "acct_1", Environment: "test", Project: []string{"invoice"}}
	for _, body := range []string{
		`{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice","subscription":"sub_9"}}}`,
		`{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice","subscription":{"id":"sub_9"}}}}`,
		`{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice","parent":{"subscription_details":{"subscription":"sub_9"}}}}}`,
	} {
		ev, err := Verifier{}.Identify(wide, []byte(body), time.Now())
		require.NoError(t, err)
		require.Equal(t, []string{"invoice", "in_1"}, []string{ev.ResourceType, ev.ResourceID}, body)
		plan, err := Provider{}.Interpret(stored(ev), wide)
		require.NoError(t, err)
		require.Equal(t, provider.Plan{Fetch: true, Refresh: []provider.ResourceRef{{Type: "subscription", ID: "sub_9"}}}, plan, body)

		plan, err = Provider{}.Interpret(stored(ev), invoicesOnly)
		require.NoError(t, err)
		require.Equal(t, provider.Plan{Fetch: true}, plan, "subscriptions not projected: none refreshed")

		ev, err = Verifier{}.Identify(plain, []byte(body), time.Now())
		require.NoError(t, err)
		require.Equal(t, []string{"subscription", "sub_9"}, []string{ev.ResourceType, ev.ResourceID}, body)
		plan, err = Provider{}.Interpret(stored(ev), plain)
		require.NoError(t, err)
		require.Equal(t, provider.Plan{Fetch: true}, plan, "the subscription's own event fetches it")
	}
	lone := `{"id":"evt_2","type":"invoice.created","data":{"object":{"id":"in_2","object":"invoice","subscription":null}}}`
	ev, err := Verifier{}.Identify(wide, []byte(lone), time.Now())
	require.NoError(t, err)
	plan, err := Provider{}.Interpret(stored(ev), wide)
	require.NoError(t, err)
	require.Equal(t, provider.Plan{Fetch: true}, plan)
}

func stored(ev provider.Event) provider.StoredEvent {
	return provider.StoredEvent{EventType: ev.Type, ResourceType: ev.ResourceType, ResourceID: ev.ResourceID, Payload: ev.Payload}
}
