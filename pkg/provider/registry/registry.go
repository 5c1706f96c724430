// Package registry maps provider names to their adapters. It lives apart from
// package provider because the adapters import provider.
package registry

import (
	"errors"
	"fmt"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
)

// ErrUnknownProvider is returned for a name no adapter handles.
var ErrUnknownProvider = errors.New("unknown provider")

// Verifier returns the adapter for providerName, one of the provider.* names.
func Verifier(providerName string) (provider.Verifier, error) {
	switch providerName {
	case provider.Stripe:
		return stripe.Verifier{}, nil
	case provider.Chargebee:
		return chargebee.Verifier{}, nil
	case provider.GitHub:
		return github.Verifier{}, nil
	case provider.StandardWebhooks:
		return standardwebhooks.Verifier{}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownProvider, providerName)
}

// Identifier returns the identity reader of providerName for events its
// API lists (Stripe, Chargebee); nil for a provider whose API lists no
// events.
func Identifier(providerName string) provider.Identifier {
	switch providerName {
	case provider.Stripe:
		return stripe.Verifier{}
	case provider.Chargebee:
		return chargebee.Verifier{}
	}
	return nil
}
