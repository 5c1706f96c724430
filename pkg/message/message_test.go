package message_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
)

func sub(id string) message.Resource {
	return message.Resource{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", Type: "subscription", ID: id}
}

// The key starts with provider and source account and names exactly one
// resource: the relay partitions by it, so one resource is handled by one
// partition, in order. Fails if a part of the identity is left out of the
// key or the parts are reordered.
func TestKeyNamesOneResourceStartingWithProviderAndAccount(t *testing.T) {
	t.Parallel()
	require.Equal(t, "stripe/acct_1/test/subscription/sub_1", sub("sub_1").Key())

	base := sub("sub_1")
	others := []message.Resource{
		{Provider: "chargebee", SourceAccount: "acct_1", Environment: "test", Type: "subscription", ID: "sub_1"},
		{Provider: "stripe", SourceAccount: "acct_2", Environment: "test", Type: "subscription", ID: "sub_1"},
		{Provider: "stripe", SourceAccount: "acct_1", Environment: "live", Type: "subscription", ID: "sub_1"},
		{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", Type: "invoice", ID: "sub_1"},
		sub("sub_2"),
	}
	for _, o := range others {
		require.NotEqual(t, base.Key(), o.Key(), "%+v shares a key with %+v", o, base)
	}
}

// Decode refuses every record the processor could not handle, with the
// reason, and accepts the two kinds it can. Fails if a check is dropped: a
// record without an account would be handled under another tenant's key, an
// event without its id could not find its inbox row.
func TestDecodeRefusesRecordsTheProcessorCannotHandle(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, value, err string
	}{
		{"not json", `{"kind":`, "decode message"},
		{"not an object", `[1,2]`, "decode message"},
		{"no kind", `{"provider":"stripe","source_account":"a","environment":"test","event_id":"evt_1"}`, `unknown kind ""`},
		{"unknown kind", `{"kind":"hint","provider":"stripe","source_account":"a","environment":"test","event_id":"evt_1"}`, `unknown kind "hint"`},
		{"no provider", `{"kind":"event","source_account":"a","environment":"test","event_id":"evt_1"}`, "missing provider, account or environment"},
		{"no account", `{"kind":"event","provider":"stripe","environment":"test","event_id":"evt_1"}`, "missing provider, account or environment"},
		{"no environment", `{"kind":"event","provider":"stripe","source_account":"a","event_id":"evt_1"}`, "missing provider, account or environment"},
		{"event without id", `{"kind":"event","provider":"stripe","source_account":"a","environment":"test","resource_type":"subscription","resource_id":"sub_1"}`, "event without event_id"},
		{"check without type", `{"kind":"check","provider":"stripe","source_account":"a","environment":"test","resource_id":"sub_1"}`, "check without resource"},
		{"check without id", `{"kind":"check","provider":"stripe","source_account":"a","environment":"test","resource_type":"subscription"}`, "check without resource"},
	} {
		_, err := message.Decode([]byte(tc.value))
		require.Error(t, err, tc.name)
		require.ErrorContains(t, err, tc.err, tc.name)
	}

	// An event needs no resource (the inbox row has it); a check needs no event.
	m, err := message.Decode([]byte(`{"kind":"event","provider":"stripe","source_account":"a","environment":"test","event_id":"evt_1"}`))
	require.NoError(t, err)
	require.Equal(t, "evt_1", m.EventID)
	m, err = message.Decode([]byte(`{"kind":"check","provider":"stripe","source_account":"a","environment":"test","resource_type":"subscription","resource_id":"sub_1"}`))
	require.NoError(t, err)
	require.Equal(t, "stripe/a/test/subscription/sub_1", m.Key())
}

// What the relay publishes decodes to the same message, every field kept.
func TestEncodedMessageDecodesToItself(t *testing.T) {
	t.Parallel()
	in := message.Message{Kind: message.KindEvent, Resource: sub("sub_1"), EventID: "evt_1",
		EventType: "customer.subscription.updated", EndpointID: "stripe-dev",
		EnqueuedAt: time.Date(2026, 11, 30, 17, 45, 9, 123456000, time.UTC), Reason: message.ReasonRetry,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "k=v"}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	out, err := message.Decode(b)
	require.NoError(t, err)
	require.Equal(t, in, out)
}

// A Kafka record carries identities, never a payload or a state (invariant
// 15): every field of Message is a string, a number or a time. A provider's
// object in a record would stay in the topic for its retention and in every
// replay, out of reach of the purge and of an erasure. Fails if a field
// that can hold a document (bytes, raw JSON, a struct, a map, a slice) is
// added to Message.
func TestMessageCarriesIdentitiesOnly(t *testing.T) {
	t.Parallel()
	timeType := reflect.TypeFor[time.Time]()
	var walk func(reflect.Type)
	walk = func(rt reflect.Type) {
		for i := range rt.NumField() {
			f := rt.Field(i)
			if f.Anonymous {
				walk(f.Type)
				continue
			}
			switch {
			case f.Type == timeType, f.Type.Kind() == reflect.String, f.Type.Kind() == reflect.Int64, f.Type.Kind() == reflect.Bool:
			default:
				t.Errorf("Message.%s is a %s: a record carries identities, never a document", f.Name, f.Type)
			}
		}
	}
	walk(reflect.TypeFor[message.Message]())
}
