package provider

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// keepByMap is Keep as it was before it scanned objects in one pass: each
// object decoded into a map. The fuzz target below holds the two to the
// same bytes on every document intake accepts.
func keepByMap(doc []byte, fields []string) ([]byte, error) {
	doc = bytes.TrimSpace(doc)
	if len(doc) == 0 || bytes.Equal(doc, []byte("null")) {
		return doc, nil
	}
	t := keepTree{}
	for _, f := range fields {
		if f = strings.TrimSpace(f); f != "" {
			t.add(strings.Split(f, "."))
		}
	}
	var apply func(t keepTree, v json.RawMessage) (json.RawMessage, error)
	apply = func(t keepTree, v json.RawMessage) (json.RawMessage, error) {
		switch firstByte(v) {
		case '{':
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(v, &obj); err != nil {
				return nil, err
			}
			kept := make(map[string]json.RawMessage, len(t))
			for name, sub := range t {
				fv, ok := obj[name]
				if !ok {
					continue
				}
				if sub == nil {
					kept[name] = fv
					continue
				}
				inner, err := apply(sub, fv)
				if err != nil {
					return nil, err
				}
				if inner != nil {
					kept[name] = inner
				}
			}
			return json.Marshal(kept)
		case '[':
			var arr []json.RawMessage
			if err := json.Unmarshal(v, &arr); err != nil {
				return nil, err
			}
			kept := make([]json.RawMessage, 0, len(arr))
			for _, el := range arr {
				inner, err := apply(t, el)
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
	out, err := apply(t, doc)
	if err != nil {
		return nil, err
	}
	if out == nil {
		return []byte("{}"), nil
	}
	return out, nil
}

// Keep reads objects in one pass (EachField) instead of decoding each into
// a map; on any document intake accepts (valid JSON and UTF-8, no repeated
// keys) it gives the same bytes as the map decoding did, escaped keys,
// nested paths and arrays included.
func FuzzKeepAgreesWithMapDecoding(f *testing.F) {
	for _, seed := range []struct{ doc, fields string }{
		{`{"id":"sub_1","status":"active","customer":{"email":"a@b.c","id":"cus_1"},"items":{"data":[{"price":{"id":"p"},"current_period_end":1},{"x":2}]}}`,
			"id,status,customer.id,items.data.current_period_end"},
		{`{"\u0069d":"esc","a":{"b":{"c":[1,{"d":true}]}}}`, "id,a.b.c.d"},
		{` { "a" : [ ] , "b" : null , "c" : "<&>" } `, "a,b,c,z"},
		{`[{"a":1},{"b":2},3]`, "a"},
		{`"text"`, "a"},
		{`{"content":{"invoice":{"id":"inv_1","status":"paid","total":100}}}`, "content.invoice.id,content.invoice.status"},
	} {
		f.Add([]byte(seed.doc), seed.fields)
	}
	f.Fuzz(func(t *testing.T, doc []byte, fields string) {
		if !json.Valid(doc) || !utf8.Valid(doc) || CheckUniqueKeys(doc) != nil {
			return
		}
		fs := strings.Split(fields, ",")
		want, wantErr := keepByMap(doc, fs)
		got, err := Keep(doc, fs)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Keep(%q, %q): error %v, map decoding's %v", doc, fs, err, wantErr)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Keep(%q, %q) = %s, map decoding gives %s", doc, fs, got, want)
		}
	})
}

// Field finds a key's value as decoding the object into a map does, on
// every document intake accepts.
func FuzzFieldAgreesWithMapDecoding(f *testing.F) {
	f.Add([]byte(`{"content":{"invoice":{"id":"inv_1"}},"event_type":"x"}`), "content")
	f.Add([]byte(`{"\u0063ontent":1, "b" : [1,2,{"c":null}] }`), "content")
	f.Add([]byte(`[1]`), "a")
	f.Fuzz(func(t *testing.T, doc []byte, key string) {
		if !json.Valid(doc) || !utf8.Valid(doc) || CheckUniqueKeys(doc) != nil {
			return
		}
		var m map[string]json.RawMessage
		mapErr := json.Unmarshal(doc, &m)
		want, wantOK := m[key]
		got, ok := Field(doc, key)
		if mapErr != nil {
			if ok {
				t.Fatalf("Field(%q, %q) found %s in a document that is not an object", doc, key, got)
			}
			return
		}
		if ok != wantOK || !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
			t.Fatalf("Field(%q, %q) = %s, %v; map decoding gives %s, %v", doc, key, got, ok, want, wantOK)
		}
	})
}
