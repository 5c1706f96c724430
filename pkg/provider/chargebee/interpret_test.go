package chargebee

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

func TestInterpret(t *testing.T) {
	t.Parallel()
	v := func(n int64) *int64 { return &n }
	sub := `{"id":"sub_1","status":"cancelled","resource_version":1700000000123}`
	got, err := Provider{}.Interpret(provider.StoredEvent{EventType: "subscription_cancelled", ResourceType: "subscription", ResourceID: "sub_1",
		Version: v(1700000000123),
		Payload: []byte(`{"content":{"subscription":` + sub + `,"invoice":{"id":"inv_1","status":"paid"}}}`)}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.Plan{
		Snapshot: &provider.Snapshot{Version: 1700000000123, State: []byte(sub), Status: "cancelled"},
	}, got, "the invoice_paid fact is declared (package fact), not coded here")
	require.Equal(t, "content.subscription", Provider{}.FactObject(provider.StoredEvent{ResourceType: "subscription"}))

	got, err = Provider{}.Interpret(provider.StoredEvent{EventType: "subscription_deleted", ResourceType: "subscription", ResourceID: "sub_1", Version: v(5),
		Payload: []byte(`{"content":{"subscription":{"resource_version":5}}}`)}, nil)
	require.NoError(t, err)
	require.True(t, got.Snapshot.Deleted, "a _deleted event is a tombstone")

	got, err = Provider{}.Interpret(provider.StoredEvent{EventType: "invoice_generated", ResourceType: "invoice", ResourceID: "inv_2", Version: v(9),
		Payload: []byte(`{"content":{"invoice":{"id":"inv_2","status":"pending","resource_version":9}}}`)}, nil)
	require.NoError(t, err)
	require.Equal(t, "pending", got.Snapshot.Status)

	got, err = Provider{}.Interpret(provider.StoredEvent{EventType: "invoice_generated", ResourceType: "subscription", ResourceID: "sub_1",
		Payload: []byte(`{"content":{"invoice":{"id":"inv_2","subscription_id":"sub_1","status":"paid"}}}`)}, nil)
	require.NoError(t, err)
	require.Nil(t, got.Snapshot, "an invoice without its subscription's object is no snapshot")

	for _, payload := range []string{`{`, `{"content":{"subscription":[]}}`} {
		_, err := Provider{}.Interpret(provider.StoredEvent{ResourceType: "subscription", ResourceID: "sub_1", Version: v(1), Payload: []byte(payload)}, nil)
		require.ErrorIs(t, err, provider.ErrMalformed, payload)
	}
	// The row's version is the one intake read; without one, the object
	// beside it is a snapshot nobody can order, whatever it says inside.
	_, err = Provider{}.Interpret(provider.StoredEvent{ResourceType: "subscription", ResourceID: "sub_1",
		Payload: []byte(`{"content":{"subscription":{"id":"sub_1","resource_version":9}}}`)}, nil)
	require.ErrorIs(t, err, provider.ErrMalformed)
}

// A Chargebee endpoint projects every type it receives a snapshot of unless
// its `project` names some: then an event about another type is recorded,
// no snapshot. Fails if the type gate is removed or ignores the list.
func TestInterpretSnapshotsOnlyProjectedTypes(t *testing.T) {
	t.Parallel()
	v := int64(3)
	ev := provider.StoredEvent{EventType: "customer_changed", ResourceType: "customer", ResourceID: "cus_1", Version: &v,
		Payload: []byte(`{"content":{"customer":{"id":"cus_1","resource_version":3}}}`)}
	for _, c := range []struct {
		ep   *provider.Endpoint
		snap bool
	}{
		{nil, true}, {&provider.Endpoint{}, true},
		{&provider.Endpoint{Project: []string{"subscription", "customer"}}, true},
		{&provider.Endpoint{Project: []string{"subscription"}}, false},
		{&provider.Endpoint{Project: []string{}}, false},
	} {
		got, err := Provider{}.Interpret(ev, c.ep)
		require.NoError(t, err)
		require.Equal(t, c.snap, got.Snapshot != nil, "%+v", c.ep)
	}
}
