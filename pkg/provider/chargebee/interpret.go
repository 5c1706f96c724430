package chargebee

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Interpret implements provider.Interpreter. A paid invoice in the
// content is a fact and a receipt to send; the resource's object is a
// snapshot at its resource_version (a "_deleted" event's, a tombstone).
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
	var s struct {
		Status          string      `json:"status"`
		ResourceVersion json.Number `json:"resource_version"`
		Deleted         bool        `json:"deleted"`
	}
	if err := json.Unmarshal(obj, &s); err != nil {
		return provider.Plan{}, fmt.Errorf("%w: content.%s: %v", provider.ErrMalformed, ev.ResourceType, err)
	}
	v, err := strconv.ParseInt(string(s.ResourceVersion), 10, 64)
	if err != nil {
		return provider.Plan{}, fmt.Errorf("%w: content.%s.resource_version: %q", provider.ErrMalformed, ev.ResourceType, s.ResourceVersion)
	}
	p.Snapshot = &provider.Snapshot{Version: v, State: obj, Status: s.Status,
		Deleted: s.Deleted || strings.HasSuffix(ev.EventType, "_deleted")}
	return p, nil
}
