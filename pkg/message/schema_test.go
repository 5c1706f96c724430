package message_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/schemas"
)

const schemaURL = "https://hookyard.dev/schemas/message.schema.json"

// compileSchema compiles the embedded schemas.MessageSchema, with formats
// (date-time) asserted.
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.MessageSchema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource(schemaURL, doc))
	s, err := c.Compile(schemaURL)
	require.NoError(t, err)
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, b []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return s.Validate(v)
}

// Every message hookyard encodes is valid under the published schema
// (schemas/message.schema.json), so a consumer that validates records
// against it accepts ours. Fails if a field is added to Message without the
// schema, renamed, or encoded in another type or format.
func TestEncodedMessagesMatchTheSchema(t *testing.T) {
	t.Parallel()
	s := compileSchema(t)
	for _, m := range []message.Message{
		{Kind: message.KindEvent, Resource: sub("sub_1"), EventID: "evt_1", EventType: "customer.subscription.updated",
			EndpointID: "stripe-dev", EnqueuedAt: time.Date(2026, 11, 30, 17, 45, 9, 123456789, time.UTC), Reason: message.ReasonWebhook,
			TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "k=v"},
		{Kind: message.KindEvent, Resource: message.Resource{Provider: "github", SourceAccount: "org", Environment: "prod"}, EventID: "d-1"},
		{Kind: message.KindCheck, Resource: sub("sub_2"), Reason: message.ReasonReconcile, EnqueuedAt: time.Now()},
		{Kind: message.KindCheck, Resource: sub("sub_3"), Reason: message.ReasonReconcile, EnqueuedAt: time.Now(), ListedSeq: 42},
	} {
		b, err := json.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, validate(t, s, b), "%s", b)
		_, err = message.Decode(b)
		require.NoError(t, err, "%s", b)
	}
}

// The schema is not a formality: it refuses what no hookyard version
// writes. Fails if the validator or the schema accepts anything.
func TestSchemaRefusesForeignRecords(t *testing.T) {
	t.Parallel()
	s := compileSchema(t)
	valid := `{"kind":"check","provider":"stripe","source_account":"a","environment":"test","resource_type":"subscription","resource_id":"sub_1"`
	require.NoError(t, validate(t, s, []byte(valid+`}`)))
	for name, b := range map[string]string{
		"unknown kind":       strings.Replace(valid, `"check"`, `"hint"`, 1) + `}`,
		"unknown field":      valid + `,"payload":{}}`,
		"missing resource":   `{"kind":"check","provider":"stripe","source_account":"a","environment":"test"}`,
		"enqueued_at a date": valid + `,"enqueued_at":"yesterday"}`,
		"event_id a number":  valid + `,"event_id":1}`,
		"a listed state":     valid + `,"listed":{"state":{"email":"jane@example.com"},"at":"2026-01-01T00:00:00Z"}}`,
		"listed_seq 0":       valid + `,"listed_seq":0}`,
	} {
		require.Error(t, validate(t, s, []byte(b)), name)
	}
}

// The schema and the Go type name the same fields, and every field the
// schema requires is always encoded (no omitempty). Fails when one changes
// without the other.
func TestSchemaAndMessageNameTheSameFields(t *testing.T) {
	t.Parallel()
	var sc struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(schemas.MessageSchema, &sc))

	fields := map[string]bool{} // json name → omitted when empty
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			fields[name] = strings.Contains(opts, "omit")
		}
	}
	walk(reflect.TypeFor[message.Message]())

	var props []string
	for p := range sc.Properties {
		props = append(props, p)
	}
	var names []string
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(props)
	slices.Sort(names)
	require.Equal(t, props, names)
	for _, r := range sc.Required {
		require.False(t, fields[r], "%s is required by the schema but omitted when empty", r)
	}
}
