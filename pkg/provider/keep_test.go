package provider_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Keep keeps exactly the named paths, through objects and arrays, with the
// provider's numbers as written, and the same bytes whatever the key order
// of the input. Fails if a field outside the paths survives, or if two
// orderings of one object keep different bytes (a versioned duplicate
// would then park as a conflict, a receipt change between attempts).
func TestKeepKeepsOnlyNamedPathsDeterministically(t *testing.T) {
	t.Parallel()
	fields := []string{"id", "status_transitions.paid_at", "items.data.current_period_end", "meta", "missing.deep"}
	a := `{"id":"in_1","email":"jane@example.com","status_transitions":{"paid_at":1700000000123456789,"voided_at":null},
		"items":{"object":"list","data":[{"current_period_end":17,"price":{"nickname":"x"}},"scalar"]},"meta":{"any":{"thing":1}}}`
	b := `{"meta":{"any":{"thing":1}},"items":{"data":[{"price":{"nickname":"x"},"current_period_end":17},"scalar"],"object":"list"},
		"status_transitions":{"voided_at":null,"paid_at":1700000000123456789},"email":"jane@example.com","id":"in_1"}`
	ka, err := provider.Keep([]byte(a), fields)
	require.NoError(t, err)
	kb, err := provider.Keep([]byte(b), fields)
	require.NoError(t, err)
	require.Equal(t, string(ka), string(kb))
	require.Equal(t, `{"id":"in_1","items":{"data":[{"current_period_end":17},{}]},"meta":{"any":{"thing":1}},`+
		`"status_transitions":{"paid_at":1700000000123456789}}`, string(ka))

	none, err := provider.Keep([]byte(a), nil)
	require.NoError(t, err)
	require.Equal(t, `{}`, string(none), "no declared field keeps nothing")
	scalar, err := provider.Keep([]byte(`"jane@example.com"`), fields)
	require.NoError(t, err)
	require.Equal(t, `{}`, string(scalar))
	_, err = provider.Keep([]byte(`{"id":`), fields)
	require.Error(t, err)
}

// BenchmarkKeepStripeSubscription measures what a projection write adds
// per event: a Stripe subscription as the API returns it (about 1 kB, one
// item) kept to the decision fields.
func BenchmarkKeepStripeSubscription(b *testing.B) {
	item := `{"id":"si_1","object":"subscription_item","created":1700000000,"current_period_end":1702592000,` +
		`"current_period_start":1700000000,"metadata":{},"price":{"id":"price_1","object":"price","active":true,` +
		`"currency":"eur","nickname":"Gold","product":"prod_1","recurring":{"interval":"month","interval_count":1},` +
		`"unit_amount":1900},"quantity":1,"subscription":"sub_1","tax_rates":[]}`
	doc := []byte(`{"id":"sub_1","object":"subscription","application":null,"billing_cycle_anchor":1700000000,` +
		`"cancel_at":null,"cancel_at_period_end":false,"canceled_at":null,"collection_method":"charge_automatically",` +
		`"created":1700000000,"currency":"eur","current_period_end":1702592000,"current_period_start":1700000000,` +
		`"customer":"cus_1","default_payment_method":"pm_1","description":"Jane Roe, 1 Main Street",` +
		`"items":{"object":"list","data":[` + item + `],"has_more":false,"url":"/v1/subscription_items?subscription=sub_1"},` +
		`"latest_invoice":"in_1","livemode":false,"metadata":{"email":"jane@example.com","note":"call before renewal"},` +
		`"status":"active","trial_end":null}`)
	fields := []string{"id", "object", "customer", "customer_id", "status", "deleted", "resource_version",
		"cancel_at_period_end", "cancel_at", "canceled_at", "ended_at", "current_period_start", "current_period_end",
		"current_term_start", "current_term_end", "items.data.current_period_end", "trial_end"}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := provider.Keep(doc, fields); err != nil {
			b.Fatal(err)
		}
	}
}
