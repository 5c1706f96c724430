package chargebee

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Interpret implements provider.Interpreter. A paid invoice in the
// content is a fact and a receipt to send; the resource's object is a
// snapshot (a "_deleted" event's, a tombstone) at the version intake read
// and checked against version_skew, the inbox row's. The version is never
// read from the payload again: a second reading could find another one.
// A resource object stored without a version is a snapshot that cannot
// be ordered: malformed, as Chargebee always sends resource_version.
func (Provider) Interpret(ev provider.StoredEvent, _ *provider.Endpoint) (provider.Plan, error) {
	var doc struct {
		Content map[string]json.RawMessage `json:"content"`
	}
	dec := json.NewDecoder(bytes.NewReader(ev.Payload))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return provider.Plan{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	var p provider.Plan
	if inv, ok := doc.Content["invoice"]; ok {
		var i struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if json.Unmarshal(inv, &i) == nil && i.ID != "" && i.Status == "paid" {
			p.Facts = append(p.Facts, provider.Fact{Type: "invoice_paid", ID: i.ID, Data: inv})
			p.Actions = append(p.Actions, provider.Action{Subject: i.ID, Kind: "receipt"})
		}
	}
	obj, ok := doc.Content[ev.ResourceType]
	if !ok || ev.ResourceID == "" {
		return p, nil
	}
	if ev.Version == nil {
		return provider.Plan{}, fmt.Errorf("%w: content.%s stored without a resource_version", provider.ErrMalformed, ev.ResourceType)
	}
	var s struct {
		Status  string `json:"status"`
		Deleted bool   `json:"deleted"`
	}
	if err := json.Unmarshal(obj, &s); err != nil {
		return provider.Plan{}, fmt.Errorf("%w: content.%s: %v", provider.ErrMalformed, ev.ResourceType, err)
	}
	p.Snapshot = &provider.Snapshot{Version: *ev.Version, State: obj, Status: s.Status,
		Deleted: s.Deleted || strings.HasSuffix(ev.EventType, "_deleted")}
	return p, nil
}
