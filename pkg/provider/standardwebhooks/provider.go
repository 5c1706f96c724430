package standardwebhooks

import "github.com/hookyard/hookyard/pkg/provider"

// Provider is the Standard Webhooks adapter for package registry: the
// minimal provider, Verifier's Verify and Interpret, with no API and no
// settings of its own.
type Provider struct{ Verifier }

// Name implements provider.Provider.
func (Provider) Name() string { return provider.StandardWebhooks }
