package message_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/schemas"
)

func compileChangeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	const url = "https://hookyard.dev/schemas/change.schema.json"
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.ChangeSchema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource(url, doc))
	s, err := c.Compile(url)
	require.NoError(t, err)
	return s
}

// The changes topic's schema and message.Change name the same fields, and
// the schema requires every one of them (the record is built in SQL with
// every key, null where it does not apply). Fails when one changes without
// the other. (pkg/projection's tests validate the records its statements
// produce against the same schema.)
func TestChangeSchemaAndChangeNameTheSameFields(t *testing.T) {
	t.Parallel()
	var sc struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(schemas.ChangeSchema, &sc))
	var names []string
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			names = append(names, name)
		}
	}
	walk(reflect.TypeFor[message.Change]())
	var props []string
	for p := range sc.Properties {
		props = append(props, p)
	}
	slices.Sort(props)
	slices.Sort(names)
	require.Equal(t, props, names)
	req := slices.Clone(sc.Required)
	slices.Sort(req)
	require.Equal(t, names, req)
}

// The schema and DecodeChange refuse what no hookyard version writes.
// Fails if either accepts anything.
func TestChangeSchemaAndDecodeRefuseForeignRecords(t *testing.T) {
	t.Parallel()
	s := compileChangeSchema(t)
	valid := `{"provider":"stripe","source_account":"a","environment":"test","resource_type":"subscription","resource_id":"sub_1",` +
		`"decision":"fetched","event_id":"evt_1","fence_generation":3,"provider_version":null,"fetch_seq":7,` +
		`"fetched_at":"2026-12-01T16:48:48.123456+00:00","status":"active","deleted":false,"state":{"status":"active"},` +
		`"changed_at":"2026-12-01T16:48:49.5+00:00"`
	require.NoError(t, validate(t, s, []byte(valid+`}`)))
	_, err := message.DecodeChange([]byte(valid + `}`))
	require.NoError(t, err)
	// schema: the schema refuses it; decode: DecodeChange does.
	for name, c := range map[string]struct {
		b              string
		schema, decode bool
	}{
		"unknown decision": {strings.Replace(valid, `"fetched"`, `"stale"`, 1) + `}`, true, true},
		// a rule between fields: Go's to keep
		"no version, no fetch": {strings.Replace(strings.Replace(valid, `"fetch_seq":7`, `"fetch_seq":null`, 1),
			`"fetched_at":"2026-12-01T16:48:48.123456+00:00"`, `"fetched_at":null`, 1) + `}`, false, true},
		"state not an object": {strings.Replace(valid, `"state":{"status":"active"}`, `"state":"active"`, 1) + `}`, true, false},
		"missing resource":    {strings.Replace(valid, `"resource_id":"sub_1",`, ``, 1) + `}`, true, true},
		"unknown field":       {valid + `,"payload":{}}`, true, false},
		"changed_at a date":   {strings.Replace(valid, `"changed_at":"2026-12-01T16:48:49.5+00:00"`, `"changed_at":"now"`, 1) + `}`, true, true},
	} {
		if c.schema {
			require.Error(t, validate(t, s, []byte(c.b)), name)
		}
		if c.decode {
			_, err := message.DecodeChange([]byte(c.b))
			require.Error(t, err, name)
		}
	}
}
