package standardwebhooks

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

func TestInterpret(t *testing.T) {
	t.Parallel()
	v := int64(7)
	ep := &provider.Endpoint{Paths: provider.Paths{State: "data.sub", Deleted: "data.gone"}}
	fetching := &provider.Endpoint{Fetch: &provider.FetchAPI{URL: "https://api.sender.example/v1/{id}", TokenEnv: "T"}}
	for name, tc := range map[string]struct {
		ev   provider.StoredEvent
		ep   *provider.Endpoint
		want provider.Plan
		err  bool
	}{
		"no resource: nothing":               {ev: provider.StoredEvent{Payload: []byte(`{}`)}},
		"no version, no fetch API: recorded": {ev: provider.StoredEvent{ResourceID: "s1"}},
		"no version, a fetch API: a hint":    {ev: provider.StoredEvent{ResourceID: "s1"}, ep: fetching, want: provider.Plan{Fetch: true}},
		"default state path":                 {ev: provider.StoredEvent{ResourceID: "s1", Version: &v, EventType: "sub.updated", Payload: []byte(`{"data":{"status":"active"}}`)}, want: provider.Plan{Snapshot: &provider.Snapshot{Version: 7, State: []byte(`{"status":"active"}`), Status: "active"}}},
		".deleted type":                      {ev: provider.StoredEvent{ResourceID: "s1", Version: &v, EventType: "sub.deleted", Payload: []byte(`{"data":{}}`)}, want: provider.Plan{Snapshot: &provider.Snapshot{Version: 7, State: []byte(`{}`), Deleted: true}}},
		"configured paths":                   {ev: provider.StoredEvent{ResourceID: "s1", Version: &v, EventType: "sub.updated", Payload: []byte(`{"data":{"sub":{"status":"past_due"},"gone":true}}`)}, ep: ep, want: provider.Plan{Snapshot: &provider.Snapshot{Version: 7, State: []byte(`{"status":"past_due"}`), Status: "past_due", Deleted: true}}},
		"no state: malformed":                {ev: provider.StoredEvent{ResourceID: "s1", Version: &v, Payload: []byte(`{"other":1}`)}, err: true},
		"not JSON: malformed":                {ev: provider.StoredEvent{ResourceID: "s1", Version: &v, Payload: []byte(`{`)}, err: true},
		"arrays are not indexed":             {ev: provider.StoredEvent{ResourceID: "s1", Version: &v, Payload: []byte(`{"data":{"sub":[{"status":"x"}]}}`)}, ep: &provider.Endpoint{Paths: provider.Paths{State: "data.sub.0"}}, err: true},
	} {
		got, err := Provider{}.Interpret(tc.ev, tc.ep)
		if tc.err {
			require.ErrorIs(t, err, provider.ErrMalformed, name)
			continue
		}
		require.NoError(t, err, name)
		require.Equal(t, tc.want, got, name)
	}
}

// A Standard Webhooks endpoint projects every resource type unless its
// `project` names some: then an event about another type asks for nothing
// (neither snapshot nor fetch). Fails if the type gate is removed.
func TestInterpretProjectsOnlyProjectedTypes(t *testing.T) {
	t.Parallel()
	v := int64(2)
	snap := provider.StoredEvent{EventType: "contact.updated", ResourceType: "contact", ResourceID: "c1", Version: &v,
		Payload: []byte(`{"data":{"id":"c1"}}`)}
	hint := provider.StoredEvent{EventType: "contact.updated", ResourceType: "contact", ResourceID: "c1"}
	f := &provider.FetchAPI{URL: "https://api.sender.example/v1/{id}", TokenEnv: "T"}
	for _, c := range []struct {
		ep   *provider.Endpoint
		want bool
	}{
		{&provider.Endpoint{Fetch: f}, true},
		{&provider.Endpoint{Project: []string{"contact"}, Fetch: f}, true},
		{&provider.Endpoint{Project: []string{"subscription"}, Fetch: f}, false},
	} {
		got, err := Provider{}.Interpret(snap, c.ep)
		require.NoError(t, err)
		require.Equal(t, c.want, got.Snapshot != nil, "snapshot on %+v", c.ep)
		got, err = Provider{}.Interpret(hint, c.ep)
		require.NoError(t, err)
		require.Equal(t, c.want, got.Fetch, "hint on %+v", c.ep)
	}
	// Without a fetch API (or an endpoint) a hint has nowhere to be read
	// from: it is recorded, a snapshot still projected.
	for _, ep := range []*provider.Endpoint{nil, {}} {
		got, err := Provider{}.Interpret(snap, ep)
		require.NoError(t, err)
		require.NotNil(t, got.Snapshot)
		got, err = Provider{}.Interpret(hint, ep)
		require.NoError(t, err)
		require.False(t, got.Fetch)
	}
}
