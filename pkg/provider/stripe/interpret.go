package stripe

import (
	"encoding/json"
	"fmt"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Interpret implements provider.Interpreter. A paid invoice is a fact and
// a receipt to send; every event about a subscription is a hint to fetch,
// since Stripe sends no version.
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
	switch ev.EventType {
	case "invoice.paid", "invoice.payment_succeeded":
		var inv struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(doc.Data.Object, &inv); err != nil || inv.ID == "" {
			return provider.Plan{}, fmt.Errorf("%w: invoice without id", provider.ErrMalformed)
		}
		p.Facts = append(p.Facts, provider.Fact{Type: "invoice_paid", ID: inv.ID, Data: doc.Data.Object})
		p.Actions = append(p.Actions, provider.Action{Subject: inv.ID, Kind: "receipt"})
	}
	// Stripe sends no version: every event about a subscription is a hint.
	if ev.ResourceType == "subscription" && ev.ResourceID != "" {
		p.Fetch = true
	}
	return p, nil
}
