package provider

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
)

// Keep returns the JSON object doc with only the fields named by fields,
// dotted paths into nested objects ("status_transitions.paid_at"). A path
// through an array applies to each of its elements
// ("items.data.current_period_end" keeps that field of every item, and the
// items as objects holding only it). A field doc does not have is left
// out; a path naming an object or an array keeps it whole. Values are
// copied as the provider wrote them (numbers are never re-encoded), and
// keys come out sorted, so the same document and fields always give the
// same bytes: a versioned write compares states by content, and a receipt
// must be byte-identical on every attempt.
//
// What is dropped is the point: a customer's e-mail, name or address in a
// provider's object is never stored where no decision and no recovery
// reads it (invariant 15). doc that is not a JSON object keeps nothing
// ({}); an empty or null doc stays as it is.
func Keep(doc []byte, fields []string) ([]byte, error) {
	return NewKeeper(fields).Keep(doc)
}

// Keeper is Keep with its fields read once, for a caller that keeps the
// same fields of many documents.
type Keeper struct{ tree keepTree }

// NewKeeper reads fields (as Keep takes them).
func NewKeeper(fields []string) Keeper {
	t := keepTree{}
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			t.add(strings.Split(f, "."))
		}
	}
	return Keeper{tree: t}
}

// Keep is Keep(doc, the Keeper's fields).
func (k Keeper) Keep(doc []byte) ([]byte, error) {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 || bytes.Equal(doc, []byte("null")) {
		return doc, nil
	}
	out, err := k.tree.apply(doc)
	if err != nil {
		return nil, fmt.Errorf("keep fields: %w", err)
	}
	if out == nil {
		return []byte("{}"), nil
	}
	return out, nil
}

// keepTree is a set of paths: a nil subtree keeps the value whole.
type keepTree map[string]keepTree

func (t keepTree) add(path []string) {
	sub, seen := t[path[0]]
	if len(path) == 1 {
		t[path[0]] = nil // whole, whatever deeper paths said
		return
	}
	if seen && sub == nil {
		return // already whole
	}
	if sub == nil {
		sub = keepTree{}
		t[path[0]] = sub
	}
	sub.add(path[1:])
}

// apply keeps t's fields of v: an object keeps its named fields, an array
// applies t to each element, anything else holds no field and is dropped
// (nil).
func (t keepTree) apply(v json.RawMessage) (json.RawMessage, error) {
	switch firstByte(v) {
	case '{':
		// One pass over the object, copying nothing it drops; a repeated
		// key keeps its last value, as decoding into a map did.
		kept := make(map[string]json.RawMessage, len(t))
		var inner error
		err := EachField(v, func(key, fv []byte) bool {
			sub, ok := t[string(key)]
			if !ok {
				return true
			}
			if sub == nil {
				kept[string(key)] = fv
				return true
			}
			in, err := sub.apply(fv)
			if err != nil {
				inner = err
				return false
			}
			if in != nil {
				kept[string(key)] = in
			} else {
				delete(kept, string(key))
			}
			return true
		})
		if err = cmp.Or(err, inner); err != nil {
			return nil, err
		}
		return json.Marshal(kept) // sorted keys
	case '[':
		var arr []json.RawMessage
		if err := json.Unmarshal(v, &arr); err != nil {
			return nil, err
		}
		kept := make([]json.RawMessage, 0, len(arr))
		for _, el := range arr {
			inner, err := t.apply(el)
			if err != nil {
				return nil, err
			}
			if inner == nil {
				inner = json.RawMessage("{}")
			}
			kept = append(kept, inner)
		}
		return json.Marshal(kept)
	}
	return nil, nil
}

func firstByte(v []byte) byte {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0
	}
	return v[0]
}
