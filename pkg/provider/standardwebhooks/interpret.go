package standardwebhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Interpret implements provider.Interpreter. An event with a version is a
// snapshot: the state at ep.Paths.State ("data" by default), deleted when
// the type ends in ".deleted" or ep.Paths.Deleted says so. An event about
// a resource without a version is a hint to fetch when the endpoint names
// a fetch API (ep.Fetch), and only recorded when it names none. Only the types the
// endpoint projects (ep.Project; by default every type) are either: an
// event about another type is recorded.
func (Provider) Interpret(ev provider.StoredEvent, ep *provider.Endpoint) (provider.Plan, error) {
	if ev.ResourceID == "" || !ep.Projects(ev.ResourceType, nil) {
		return provider.Plan{}, nil
	}
	if ev.Version == nil {
		return provider.Plan{Fetch: ep != nil && ep.Fetch != nil}, nil
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(ev.Payload))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return provider.Plan{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	statePath := "data"
	var deletedPath string
	if ep != nil {
		if ep.Paths.State != "" {
			statePath = ep.Paths.State
		}
		deletedPath = ep.Paths.Deleted
	}
	state, ok := lookupObjects(doc, statePath)
	if !ok {
		return provider.Plan{}, fmt.Errorf("%w: no state at %q", provider.ErrMalformed, statePath)
	}
	raw, err := json.Marshal(state)
	if err != nil {
		return provider.Plan{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	s := &provider.Snapshot{Version: *ev.Version, State: raw, Deleted: strings.HasSuffix(ev.EventType, ".deleted")}
	if m, ok := state.(map[string]any); ok {
		s.Status, _ = m["status"].(string)
	}
	if deletedPath != "" {
		if d, ok := lookupObjects(doc, deletedPath); ok {
			if b, ok := d.(bool); ok {
				s.Deleted = b
			}
		}
	}
	return provider.Plan{Snapshot: s}, nil
}

// lookupObjects follows a dot-separated path through objects only. Unlike
// lookup, which reads the event's identity, it never indexes an array: the
// state and deletion paths have always been read this way, and a path that
// now reached into an array would change what existing endpoints project.
func lookupObjects(doc any, path string) (any, bool) {
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

// FactObject implements provider.FactObjecter: a Standard Webhooks
// message's object is its data.
func (Provider) FactObject(provider.StoredEvent) string { return "data" }
