package provider_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// An endpoint's allow-list decides which event types are stored for
// processing; everything else is stored as ignored and answered 200. Exact
// names, "*" and trailing-prefix patterns admit; nothing else does. Fails if
// a pattern admits a type it does not name (a prefix without its dot, a
// pattern matched in the middle) or refuses one it names.
func TestAllowsAdmitsOnlyTheTypesTheAllowListNames(t *testing.T) {
	t.Parallel()
	ep := func(types ...string) *provider.Endpoint { return &provider.Endpoint{EventTypes: types} }
	for _, tc := range []struct {
		types     []string
		eventType string
		allowed   bool
	}{
		{nil, "customer.subscription.updated", true},
		{[]string{}, "anything", true},
		{[]string{"*"}, "invoice.paid", true},
		{[]string{"invoice.paid"}, "invoice.paid", true},
		{[]string{"invoice.paid"}, "invoice.payment_failed", false},
		{[]string{"invoice.paid"}, "invoice.paid.extra", false},
		{[]string{"invoice.paid"}, "", false},
		{[]string{"customer.subscription.*"}, "customer.subscription.deleted", true},
		{[]string{"customer.subscription.*"}, "customer.subscription.", true},
		{[]string{"customer.subscription.*"}, "customer.subscription", false},
		{[]string{"customer.subscription.*"}, "customer.created", false},
		{[]string{"customer.*"}, "invoice.customer.updated", false},
		{[]string{"subscription_*"}, "subscription_cancelled", true},
		{[]string{"invoice.paid", "subscription_*"}, "subscription_created", true},
		{[]string{"invoice.paid", "subscription_*"}, "customer_changed", false},
		{[]string{"*.paid"}, "invoice.paid", false},
	} {
		require.Equal(t, tc.allowed, ep(tc.types...).Allows(tc.eventType), "allow-list %q, event type %q", tc.types, tc.eventType)
	}
}

// Only "live", "prod" and "production" are live mode; every other name is
// test mode, so a Stripe key or object of the other mode is refused. Fails if
// a test environment is taken for live (a test key would read live data) or
// the other way round.
func TestIsLiveOnlyForProductionNames(t *testing.T) {
	t.Parallel()
	for _, env := range []string{"live", "prod", "production"} {
		require.True(t, provider.IsLive(env), env)
		require.True(t, (&provider.Endpoint{Environment: env}).Live(), env)
	}
	for _, env := range []string{"test", "staging", "dev", "", "Live", "PROD", "production-eu", "livemode"} {
		require.False(t, provider.IsLive(env), env)
		require.False(t, (&provider.Endpoint{Environment: env}).Live(), env)
	}
}
