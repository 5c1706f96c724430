package fact_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/provider"
)

// The built-in declarations find the facts the providers used to code:
// Stripe's invoice_paid on invoice.paid and invoice.payment_succeeded under
// the invoice's id, Chargebee's on any event whose content.invoice is paid.
// Fails if a default changes the fact's identity (type invoice_paid, id the
// invoice's), which existing fact and action rows are keyed by.
func TestDefaultDeclarationsKeepTheInvoicePaidIdentity(t *testing.T) {
	t.Parallel()
	d := fact.Declarations(nil).With(fact.Defaults)
	inv := `{"id":"in_1","subscription":"sub_1","customer_email":"jane@example.com"}`
	for _, typ := range []string{"invoice.paid", "invoice.payment_succeeded"} {
		got, err := d.Extract("stripe", provider.StoredEvent{EventType: typ, Payload: []byte(`{"data":{"object":` + inv + `}}`)}, "data.object")
		require.NoError(t, err)
		require.Equal(t, []provider.Fact{{Type: "invoice_paid", ID: "in_1", Data: []byte(inv)}}, got, typ)
	}
	got, err := d.Extract("stripe", provider.StoredEvent{EventType: "customer.subscription.updated",
		Payload: []byte(`{"data":{"object":{"id":"sub_1"}}}`)}, "data.object")
	require.NoError(t, err)
	require.Empty(t, got, "only the declared event types make the fact")

	cb := `{"content":{"subscription":{"id":"sub_1"},"invoice":{"id":"inv_1","status":"paid"}}}`
	got, err = d.Extract("chargebee", provider.StoredEvent{EventType: "subscription_renewed", Payload: []byte(cb)}, "content.subscription")
	require.NoError(t, err)
	require.Equal(t, []provider.Fact{{Type: "invoice_paid", ID: "inv_1", Data: []byte(`{"id":"inv_1","status":"paid"}`)}}, got)
	got, err = d.Extract("chargebee", provider.StoredEvent{EventType: "invoice_generated",
		Payload: []byte(`{"content":{"invoice":{"id":"inv_2","status":"pending"}}}`)}, "content.invoice")
	require.NoError(t, err)
	require.Empty(t, got, "an unpaid invoice is no fact (when: status paid)")
	got, err = d.Extract("chargebee", provider.StoredEvent{EventType: "subscription_created",
		Payload: []byte(`{"content":{"subscription":{"id":"sub_1"}}}`)}, "content.subscription")
	require.NoError(t, err)
	require.Empty(t, got)
}

// An event of a type a declaration names whose object or identity is
// missing is malformed (dead at once, kept), not a fact without identity;
// a declaration without on skips events that lack its object.
func TestDeclaredEventWithoutObjectOrIdentityIsMalformed(t *testing.T) {
	t.Parallel()
	d := fact.Declarations(nil).With(fact.Defaults)
	for _, payload := range []string{`{"data":{"object":{}}}`, `{"data":{}}`, `{"data":{"object":null}}`, `{"data":{"object":{"id":{"x":1}}}}`} {
		_, err := d.Extract("stripe", provider.StoredEvent{EventType: "invoice.payment_succeeded", Payload: []byte(payload)}, "data.object")
		require.ErrorIs(t, err, provider.ErrMalformed, payload)
	}
	got, err := d.Extract("chargebee", provider.StoredEvent{EventType: "x", Payload: []byte(`{"content":{"invoice":{"status":"paid"}}}`)}, "")
	require.NoError(t, err)
	require.Empty(t, got)
}

// A declared fact beyond the defaults: its own event types, object path,
// identity and resource link; several facts from one event come out in
// declaration order. A config entry that only names fields keeps the
// default's events, object and identity, so configs written before facts
// said more record the same facts.
func TestDeclaredFactsFindTheirObjectIdentityAndResource(t *testing.T) {
	t.Parallel()
	d := fact.Declarations{
		{Provider: "stripe", Type: "invoice_paid", Fields: []string{"id"}},
		{Provider: "stripe", Type: "charge_refunded", On: []string{"charge.refunded"}, ID: "id",
			Resource: &fact.ResourceLink{Type: "customer", ID: "customer"}, Fields: []string{"id", "amount_refunded"}},
		{Provider: "standard-webhooks", Type: "payment_made", On: []string{"payment.made"}, Object: "data.payment", ID: "ref.no",
			Fields: []string{"ref"}},
	}.With(fact.Defaults)
	require.NoError(t, d.Validate())
	require.Equal(t, []string{"invoice.paid", "invoice.payment_succeeded"}, d[0].On)
	require.Equal(t, "id", d[0].ID)
	require.Equal(t, []string{"id"}, d.Fields("stripe", "invoice_paid"))

	ch := `{"id":"ch_1","customer":"cus_1","amount_refunded":500}`
	got, err := d.Extract("stripe", provider.StoredEvent{EventType: "charge.refunded", Payload: []byte(`{"data":{"object":` + ch + `}}`)}, "data.object")
	require.NoError(t, err)
	require.Equal(t, []provider.Fact{{Type: "charge_refunded", ID: "ch_1", ResourceType: "customer", ResourceID: "cus_1", Data: []byte(ch)}}, got)

	got, err = d.Extract("standard-webhooks", provider.StoredEvent{EventType: "payment.made",
		Payload: []byte(`{"data":{"payment":{"ref":{"no":42}}}}`)}, "data")
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "42", got[0].ID, "a numeric identity is kept as written")
}

func TestDeclarationErrorsNameTheEntry(t *testing.T) {
	t.Parallel()
	err := fact.Declarations{
		{Provider: "stripe", Type: "a", Fields: []string{"id"}, Object: "data..object", ID: ".id",
			Resource: &fact.ResourceLink{ID: "x"}, When: map[string]string{"": "paid"}, On: []string{" "}},
	}.Validate()
	require.ErrorContains(t, err, `facts[0].object: "data..object" is not a dotted field path`)
	require.ErrorContains(t, err, `facts[0].id: ".id" is not a dotted field path`)
	require.ErrorContains(t, err, "facts[0].resource: type and id")
	require.ErrorContains(t, err, `facts[0].when: "" is not a dotted field path`)
	require.ErrorContains(t, err, "facts[0].on[0]: an event type is required")
}

// The declarations run on every event the processor handles: a Stripe
// event no declaration names costs a type comparison; a Chargebee event
// (its invoice_paid declares no event types) costs a walk to
// content.invoice.
func BenchmarkExtract(b *testing.B) {
	d := fact.Declarations(nil).With(fact.Defaults)
	sub := `{"id":"sub_1","status":"active","customer_id":"cus_1","plan_id":"basic","resource_version":1700000000123,` +
		`"subscription_items":[{"item_price_id":"basic-USD","quantity":1,"amount":1000}],"billing_address":{"line1":"x","city":"y"}}`
	inv := `{"id":"inv_1","status":"paid","total":1000,"amount_paid":1000,"currency_code":"USD","customer_id":"cus_1",` +
		`"subscription_id":"sub_1","paid_at":1700000000,"date":1700000000,"line_items":[{"id":"li_1","amount":1000,"description":"Basic"}]}`
	for _, bc := range []struct {
		name, provider, eventType, object, payload string
	}{
		{"stripe subscription event", "stripe", "customer.subscription.updated", "data.object", `{"data":{"object":` + sub + `}}`},
		{"stripe invoice.paid", "stripe", "invoice.paid", "data.object", `{"data":{"object":` + inv + `}}`},
		{"chargebee subscription_renewed with invoice", "chargebee", "subscription_renewed", "content.subscription",
			`{"content":{"subscription":` + sub + `,"invoice":` + inv + `}}`},
	} {
		ev := provider.StoredEvent{EventType: bc.eventType, Payload: []byte(bc.payload)}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Extract(bc.provider, ev, bc.object); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
