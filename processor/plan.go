package processor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// errMalformed marks an event that can never be processed as it is; it goes
// straight to the dead list with the reason, kept for inspection.
var errMalformed = errors.New("malformed event")

// plan is what one event asks for.
type plan struct {
	// snapshot is a versioned state to apply.
	snapshot *snapshot
	// fetch asks for the resource's current state from the provider.
	fetch   bool
	facts   []fact
	actions []action
}

type snapshot struct {
	version int64
	state   []byte
	status  string
	deleted bool
}

type fact struct {
	typ, id string
	data    []byte
}

type action struct {
	subject, kind string
}

// interpret reads an inbox row's payload into a plan. Provider, account and
// environment are the row's, which came from the endpoint.
func interpret(row *inboxRow, ep *provider.Endpoint) (plan, error) {
	switch row.provider {
	case provider.Stripe:
		return interpretStripe(row)
	case provider.Chargebee:
		return interpretChargebee(row)
	case provider.StandardWebhooks:
		return interpretStandard(row, ep)
	}
	return plan{}, nil
}

func interpretStripe(row *inboxRow) (plan, error) {
	var ev struct {
		Data struct {
			Object json.RawMessage `json:"object"`
		} `json:"data"`
	}
	if err := json.Unmarshal(row.payload, &ev); err != nil {
		return plan{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	var p plan
	switch row.eventType {
	case "invoice.paid", "invoice.payment_succeeded":
		var inv struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(ev.Data.Object, &inv); err != nil || inv.ID == "" {
			return plan{}, fmt.Errorf("%w: invoice without id", errMalformed)
		}
		p.facts = append(p.facts, fact{typ: "invoice_paid", id: inv.ID, data: ev.Data.Object})
		p.actions = append(p.actions, action{subject: inv.ID, kind: "receipt"})
	}
	// Stripe sends no version: every event about a subscription is a hint.
	if row.resourceType == "subscription" && row.resourceID != "" {
		p.fetch = true
	}
	return p, nil
}

func interpretChargebee(row *inboxRow) (plan, error) {
	var ev struct {
		Content map[string]json.RawMessage `json:"content"`
	}
	dec := json.NewDecoder(bytes.NewReader(row.payload))
	dec.UseNumber()
	if err := dec.Decode(&ev); err != nil {
		return plan{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	var p plan
	if inv, ok := ev.Content["invoice"]; ok {
		var i struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		}
		if json.Unmarshal(inv, &i) == nil && i.ID != "" && i.Status == "paid" {
			p.facts = append(p.facts, fact{typ: "invoice_paid", id: i.ID, data: inv})
			p.actions = append(p.actions, action{subject: i.ID, kind: "receipt"})
		}
	}
	obj, ok := ev.Content[row.resourceType]
	if !ok || row.resourceID == "" {
		return p, nil
	}
	var s struct {
		Status          string      `json:"status"`
		ResourceVersion json.Number `json:"resource_version"`
		Deleted         bool        `json:"deleted"`
	}
	if err := json.Unmarshal(obj, &s); err != nil {
		return plan{}, fmt.Errorf("%w: content.%s: %v", errMalformed, row.resourceType, err)
	}
	v, err := strconv.ParseInt(string(s.ResourceVersion), 10, 64)
	if err != nil {
		return plan{}, fmt.Errorf("%w: content.%s.resource_version: %q", errMalformed, row.resourceType, s.ResourceVersion)
	}
	p.snapshot = &snapshot{version: v, state: obj, status: s.Status,
		deleted: s.Deleted || strings.HasSuffix(row.eventType, "_deleted")}
	return p, nil
}

func interpretStandard(row *inboxRow, ep *provider.Endpoint) (plan, error) {
	if row.resourceID == "" {
		return plan{}, nil
	}
	if row.version == nil {
		return plan{fetch: true}, nil
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(row.payload))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return plan{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	statePath := "data"
	var deletedPath string
	if ep != nil {
		if ep.Paths.State != "" {
			statePath = ep.Paths.State
		}
		deletedPath = ep.Paths.Deleted
	}
	state, ok := lookup(doc, statePath)
	if !ok {
		return plan{}, fmt.Errorf("%w: no state at %q", errMalformed, statePath)
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return plan{}, fmt.Errorf("%w: %v", errMalformed, err)
	}
	s := &snapshot{version: *row.version, state: raw, deleted: strings.HasSuffix(row.eventType, ".deleted")}
	if m, ok := state.(map[string]any); ok {
		s.status, _ = m["status"].(string)
	}
	if deletedPath != "" {
		if d, ok := lookup(doc, deletedPath); ok {
			if b, ok := d.(bool); ok {
				s.deleted = b
			}
		}
	}
	return plan{snapshot: s}, nil
}

func lookup(doc any, path string) (any, bool) {
	cur := doc
	for _, part := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}
