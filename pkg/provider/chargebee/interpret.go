package chargebee

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Interpret implements provider.Interpreter. The resource's object is a
// snapshot (a "_deleted" event's, a tombstone) at the version intake read
// and checked against version_skew, the inbox row's. The version is never
// read from the payload again: a second reading could find another one.
// A resource object stored without a version is a snapshot that cannot
// be ordered: malformed, as Chargebee always sends resource_version.
// Only the types the endpoint projects (ep.Project; by default every type)
// become snapshots: an event about another type is recorded.
func (Provider) Interpret(ev provider.StoredEvent, ep *provider.Endpoint) (provider.Plan, error) {
	var doc struct {
		Content map[string]json.RawMessage `json:"content"`
	}
	dec := json.NewDecoder(bytes.NewReader(ev.Payload))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return provider.Plan{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	var p provider.Plan
	obj, ok := doc.Content[ev.ResourceType]
	if !ok || ev.ResourceID == "" || !ep.Projects(ev.ResourceType, nil) {
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

// FactObject implements provider.FactObjecter: a Chargebee event's objects
// are in content, one per type; by default the event's resource's. A fact
// about another object names it (content.invoice).
func (Provider) FactObject(ev provider.StoredEvent) string {
	return "content." + ev.ResourceType
}
