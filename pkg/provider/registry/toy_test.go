package registry

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// toy is the smallest provider with every capability: a shared token in a
// header, events that carry a versioned subscription, an API that reads a
// subscription, and one endpoint key of its own (api_key). It is what
// docs/adding-a-provider.md walks through, written as a test.
type toy struct{}

func (toy) Name() string { return "toy" }

type toyEvent struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Sub  struct {
		ID      string `json:"id"`
		Version int64  `json:"version"`
		Status  string `json:"status"`
	} `json:"subscription"`
}

func (toy) Verify(ep *provider.Endpoint, h http.Header, body []byte, _ time.Time) (provider.Event, error) {
	ok := false
	for _, s := range ep.Secrets {
		ok = ok || subtle.ConstantTimeCompare([]byte(h.Get("X-Toy-Token")), []byte(s)) == 1
	}
	if !ok {
		return provider.Event{}, provider.ErrUnauthenticated
	}
	var ev toyEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.ID == "" {
		return provider.Event{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	v := ev.Sub.Version
	return provider.Event{ID: ev.ID, Type: ev.Type, ResourceType: "subscription", ResourceID: ev.Sub.ID,
		Version: &v, Payload: body, ValidJSON: true}, nil
}

func (toy) Interpret(ev provider.StoredEvent, _ *provider.Endpoint) (provider.Plan, error) {
	var doc struct {
		Sub json.RawMessage `json:"subscription"`
	}
	if err := json.Unmarshal(ev.Payload, &doc); err != nil || ev.Version == nil {
		return provider.Plan{}, fmt.Errorf("%w: no subscription snapshot", provider.ErrMalformed)
	}
	var s struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(doc.Sub, &s); err != nil {
		return provider.Plan{}, fmt.Errorf("%w: %v", provider.ErrMalformed, err)
	}
	return provider.Plan{Snapshot: &provider.Snapshot{Version: *ev.Version, State: doc.Sub, Status: s.Status}}, nil
}

func (toy) EndpointKeys() []string { return []string{"api_key"} }

func (toy) CheckEndpoint(ep *provider.Endpoint) []error {
	if ep.APIKey == "" {
		return []error{fmt.Errorf("api_key is required for toy endpoints")}
	}
	return nil
}

func (toy) Connect(_ []provider.Endpoint, opts provider.APIOptions) (provider.Connection, error) {
	return toyConn{base: opts.BaseURL}, nil
}

type toyConn struct{ base string }

func (c toyConn) Fetcher() provider.Fetcher { return c }

func (toyConn) Source(*provider.Endpoint) (*provider.Source, error) { return nil, nil }

func (c toyConn) Fetch(_ context.Context, r message.Resource) (provider.Fetched, error) {
	if r.ID != "sub_1" {
		return provider.Fetched{}, fmt.Errorf("fetch toy %s at %s: %w", r.ID, c.base, provider.ErrNotFound)
	}
	return provider.Fetched{State: []byte(`{"id":"sub_1","status":"active"}`), Status: "active"}, nil
}

// Adding a provider is one package and one line in all: a toy provider
// registered in a test is verified, interpreted, checked and connected
// through the registry alone. Fails if a service needs anything more than
// the provider interfaces to take a provider in.
func TestAddingAProviderIsOneRegistryLine(t *testing.T) {
	saved := all
	all = append(append([]entry(nil), all...), entry{toy{}, nil}) // the one line
	defer func() { all = saved }()

	require.Contains(t, Names(), "toy")
	ep := &provider.Endpoint{ID: "toy-dev", Provider: "toy", SourceAccount: "acct", Environment: "test",
		Secrets: []string{"tok"}, APIKey: "key"}

	// Receiver: the delivery is verified over its raw bytes.
	v, err := Verifier("toy")
	require.NoError(t, err)
	body := []byte(`{"id":"ev_1","type":"subscription.updated","subscription":{"id":"sub_1","version":3,"status":"active"}}`)
	_, err = v.Verify(ep, http.Header{"X-Toy-Token": {"wrong"}}, body, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
	ev, err := v.Verify(ep, http.Header{"X-Toy-Token": {"tok"}}, body, time.Now())
	require.NoError(t, err)
	require.Equal(t, "sub_1", ev.ResourceID)

	// Processor: the stored event becomes a plan.
	plan, err := Interpreter("toy").Interpret(provider.StoredEvent{EventType: ev.Type, ResourceType: ev.ResourceType,
		ResourceID: ev.ResourceID, Version: ev.Version, Payload: ev.Payload}, ep)
	require.NoError(t, err)
	require.NotNil(t, plan.Snapshot)
	require.Equal(t, int64(3), plan.Snapshot.Version)
	require.Equal(t, "active", plan.Snapshot.Status)
	_, err = Interpreter("toy").Interpret(provider.StoredEvent{Payload: []byte(`not json`)}, ep)
	require.ErrorIs(t, err, provider.ErrMalformed, "malformed: dead at once")

	// Config: its own checks, and its keys no longer refused.
	require.Empty(t, CheckEndpoint(ep))
	noKey := *ep
	noKey.APIKey = ""
	require.ErrorContains(t, errors.Join(CheckEndpoint(&noKey)...), "api_key is required for toy endpoints")
	gh := provider.Endpoint{Provider: provider.GitHub, APIKey: "k"}
	require.ErrorContains(t, errors.Join(CheckEndpoint(&gh)...), "api_key is only read for stripe and chargebee and toy endpoints")
	require.Nil(t, Identifier("toy"), "no events API: no identity reader")

	// Processor and reconciler: the connection's fetcher, found by name.
	conns, err := Connect([]provider.Endpoint{*ep}, map[string]provider.APIOptions{"toy": {BaseURL: "http://toy.test"}})
	require.NoError(t, err)
	require.NotNil(t, conns["toy"])
	f := conns["toy"].Fetcher()
	require.NotNil(t, f)
	got, err := f.Fetch(t.Context(), message.Resource{Provider: "toy", SourceAccount: "acct", Environment: "test", Type: "subscription", ID: "sub_1"})
	require.NoError(t, err)
	require.Equal(t, "active", got.Status)
	_, err = f.Fetch(t.Context(), message.Resource{Provider: "toy", ID: "sub_gone"})
	require.ErrorIs(t, err, provider.ErrNotFound)
	src, err := conns["toy"].Source(ep)
	require.NoError(t, err)
	require.Nil(t, src, "nothing to reconcile")
}
