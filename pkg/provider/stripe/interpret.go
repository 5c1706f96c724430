package stripe

import (
	"encoding/json"
	"fmt"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Interpret implements provider.Interpreter. Every event about a
// subscription is a hint to fetch, since Stripe sends no version. Facts
// (an invoice paid) are declared, not read here: see FactObject.
func (Provider) Interpret(ev provider.StoredEvent, _ *provider.Endpoint) (provider.Plan, error) {
	var doc struct {
		Data struct {
			Object json.RawMessage `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(ev.Payload, &doc); err != nil {
		return provider.Plan{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	var p provider.Plan
	// Stripe sends no version: every event about a subscription is a hint.
	if ev.ResourceType == "subscription" && ev.ResourceID != "" {
		p.Fetch = true
	}
	return p, nil
}

// FactObject implements provider.FactObjecter: a Stripe event's object is
// data.object.
func (Provider) FactObject(provider.StoredEvent) string { return "data.object" }
