// Package registry is the one list of hookyard's providers. Adding a
// provider is one new folder under pkg/provider and one line in all below;
// every service finds what a provider can do here, by name, and must never
// name a provider itself. It lives apart from package provider because the
// adapters import provider.
package registry

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/chargebee/chargebeesim"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// all is every provider, once, in the order config errors list them, with
// the simulator `hookyard dev` serves for its API (nil: none).
var all = []entry{
	{stripe.Provider{}, stripesim.Dev{}},
	{chargebee.Provider{}, chargebeesim.Dev{}},
	{github.Provider{}, githubsim.Dev{}},
	{standardwebhooks.Provider{}, nil},
}

// entry is one provider and its dev simulator. The simulator is apart
// because a simulator imports its provider to sign what it delivers.
type entry struct {
	provider.Provider
	dev provider.DevSimulator
}

// ErrUnknownProvider is returned for a name no adapter handles.
var ErrUnknownProvider = errors.New("unknown provider")

// All returns every provider, in registry order.
func All() []provider.Provider {
	out := make([]provider.Provider, len(all))
	for i, e := range all {
		out[i] = e.Provider
	}
	return out
}

// Names returns every provider's name, in registry order.
func Names() []string {
	names := make([]string, len(all))
	for i, p := range all {
		names[i] = p.Name()
	}
	return names
}

// Lookup returns the provider named name.
func Lookup(name string) (provider.Provider, error) {
	for _, e := range all {
		if e.Name() == name {
			return e.Provider, nil
		}
	}
	return nil, fmt.Errorf("%w: %q", ErrUnknownProvider, name)
}

// Verifier returns the adapter that verifies providerName's deliveries.
func Verifier(providerName string) (provider.Verifier, error) {
	p, err := Lookup(providerName)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Identifier returns the identity reader of providerName for events its
// API lists; nil for a provider whose API lists no events.
func Identifier(providerName string) provider.Identifier {
	p, _ := Lookup(providerName)
	id, _ := p.(provider.Identifier)
	return id
}

// Interpreter returns providerName's interpreter; nil for a name no
// adapter handles.
func Interpreter(providerName string) provider.Interpreter {
	p, _ := Lookup(providerName)
	if p == nil {
		return nil
	}
	return p
}

// KnownEventTypes returns the event types providerName's adapter knows
// (see provider.EventTyper); nil for none.
func KnownEventTypes(providerName string) []string {
	p, _ := Lookup(providerName)
	if et, ok := p.(provider.EventTyper); ok {
		return et.KnownEventTypes()
	}
	return nil
}

// CheckEndpoint returns every problem of ep that depends on its provider:
// a provider no adapter handles, a provider-specific key (provider.
// ProviderKeys) its provider does not read, and what the provider's own
// EndpointChecker finds. Each error's text starts with the key at fault,
// e.g. `site is only read for chargebee endpoints`.
func CheckEndpoint(ep *provider.Endpoint) []error {
	var errs []error
	p, err := Lookup(ep.Provider)
	if err != nil {
		errs = append(errs, fmt.Errorf("provider %q is not one of %s", ep.Provider, strings.Join(Names(), ", ")))
	}
	for _, k := range provider.ProviderKeys(ep) {
		if k.Set && !slices.Contains(keysOf(p), k.Key) {
			errs = append(errs, fmt.Errorf("%s is only read for %s endpoints", k.Key, strings.Join(readers(k.Key), " and ")))
		}
	}
	if c, ok := p.(provider.EndpointChecker); ok {
		errs = append(errs, c.CheckEndpoint(ep)...)
	}
	return errs
}

// keysOf are the provider-specific keys p reads; none for nil.
func keysOf(p provider.Provider) []string {
	if c, ok := p.(provider.EndpointChecker); ok {
		return c.EndpointKeys()
	}
	return nil
}

// readers are the names of the providers that read key.
func readers(key string) []string {
	var names []string
	for _, e := range all {
		if slices.Contains(keysOf(e.Provider), key) {
			names = append(names, e.Name())
		}
	}
	return names
}

// Connect builds the API connection of every provider that has an API
// (provider.Connector), by name, each with its options from opts (by
// name; a provider without an entry gets the zero APIOptions).
func Connect(eps []provider.Endpoint, opts map[string]provider.APIOptions) (map[string]provider.Connection, error) {
	conns := map[string]provider.Connection{}
	for _, e := range all {
		c, ok := e.Provider.(provider.Connector)
		if !ok {
			continue
		}
		conn, err := c.Connect(eps, opts[e.Name()])
		if err != nil {
			return nil, err
		}
		conns[e.Name()] = conn
	}
	return conns, nil
}

// Simulator returns the simulator `hookyard dev` serves for providerName's
// API; nil when there is none.
func Simulator(providerName string) provider.DevSimulator {
	for _, e := range all {
		if e.Name() == providerName {
			return e.dev
		}
	}
	return nil
}
