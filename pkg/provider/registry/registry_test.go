package registry

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
)

func TestVerifier(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]provider.Verifier{
		provider.Stripe:           stripe.Provider{},
		provider.Chargebee:        chargebee.Provider{},
		provider.GitHub:           github.Provider{},
		provider.StandardWebhooks: standardwebhooks.Provider{},
	} {
		got, err := Verifier(name)
		require.NoError(t, err, name)
		require.IsType(t, want, got, name)
	}
}

func TestVerifierUnknown(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "Stripe", "paddle"} {
		v, err := Verifier(name)
		require.ErrorIs(t, err, ErrUnknownProvider)
		require.Nil(t, v)
	}
}

// Every provider is listed once: its name is part of every stored identity,
// and a second entry would never be reached.
func TestEveryProviderIsListedOnce(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, name := range Names() {
		require.False(t, seen[name], name)
		seen[name] = true
	}
	require.Equal(t, []string{provider.Stripe, provider.Chargebee, provider.GitHub, provider.StandardWebhooks}, Names())
}
