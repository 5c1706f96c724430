package fact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Extract returns the facts that providerName's declarations find in ev,
// in declaration order, each with its object whole as Data (the processor
// keeps only the declaration's Fields of it). defaultObject is where the
// provider's events carry their object (registry.FactObject), for a
// declaration that names no Object.
//
// It is a pure function of the event and the declarations, as an
// Interpreter is: every retry and replay of the event finds the same facts
// under the same identities, so recording them again changes nothing.
//
// An event whose type a declaration names in On but whose object or
// identity is missing is malformed (provider.ErrMalformed): it would fail
// the same way on every retry. A declaration without On only finds its fact
// in events that carry the object and meet When.
func (d Declarations) Extract(providerName string, ev provider.StoredEvent, defaultObject string) ([]provider.Fact, error) {
	var out []provider.Fact
	for _, dec := range d {
		if dec.Provider != providerName {
			continue
		}
		named := slices.Contains(dec.On, ev.EventType)
		if len(dec.On) > 0 && !named {
			continue
		}
		path := dec.Object
		if path == "" {
			path = defaultObject
		}
		obj, ok := lookupRaw(ev.Payload, path)
		if !ok {
			if named {
				return nil, fmt.Errorf("%w: %s event %s has no object at %q", provider.ErrMalformed, dec.Type, ev.EventType, path)
			}
			continue
		}
		if !meets(obj, dec.When) {
			continue
		}
		idPath := dec.ID
		if idPath == "" {
			idPath = "id"
		}
		id, ok := text(obj, idPath)
		if !ok || id == "" {
			if named {
				return nil, fmt.Errorf("%w: %s object without %s", provider.ErrMalformed, dec.Type, idPath)
			}
			continue
		}
		f := provider.Fact{Type: dec.Type, ID: id, Data: obj}
		if r := dec.Resource; r != nil {
			if rid, ok := text(obj, r.ID); ok && rid != "" {
				f.ResourceType, f.ResourceID = r.Type, rid
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// meets reports whether every condition of when holds on obj.
func meets(obj []byte, when map[string]string) bool {
	for path, want := range when {
		if got, ok := text(obj, path); !ok || got != want {
			return false
		}
	}
	return true
}

// text is the scalar at path in doc as text: a string's value, a number
// as written, true or false. ok is false for a missing path, null, an
// object or an array.
func text(doc []byte, path string) (string, bool) {
	raw, ok := lookupRaw(doc, path)
	if !ok {
		return "", false
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return s, true
	case '{', '[':
		return "", false
	}
	return string(raw), true
}

// lookupRaw follows a dotted path through objects and returns the value's
// bytes as the provider wrote them; "" is doc itself. A missing path, a
// step through a non-object, and null are not found.
func lookupRaw(doc []byte, path string) ([]byte, bool) {
	cur := bytes.TrimSpace(doc)
	if path != "" {
		for _, part := range strings.Split(path, ".") {
			if len(cur) == 0 || cur[0] != '{' {
				return nil, false
			}
			// One pass to the key, copying nothing: this runs for every
			// event of a provider with a declaration that names no event
			// type (Chargebee's paid invoices).
			v, ok := provider.Field(cur, part)
			if !ok {
				return nil, false
			}
			cur = bytes.TrimSpace(v)
		}
	}
	if len(cur) == 0 || bytes.Equal(cur, []byte("null")) {
		return nil, false
	}
	return cur, true
}
