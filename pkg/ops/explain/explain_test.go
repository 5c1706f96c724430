package explain_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/explain"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/processor"
	"github.com/hookyard/hookyard/reconciler"
)

// Two Standard Webhooks endpoints of one sender: one sends versioned
// snapshots, the other hints without a version, so one resource sees
// versioned decisions, fetches and checks.
const (
	account  = "sender"
	epSnap   = "sw-snap"
	epHint   = "sw-hint"
	subID    = "sub_story"
	typeSnap = "subscription.updated"
	typeHint = "subscription.touched"
)

var secret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("explain-test-key-0123456789abcd"))

// scripted answers fetches with whatever the test set last.
type scripted struct {
	mu     sync.Mutex
	status string
	err    error
}

func (s *scripted) set(status string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.err = status, err
}

func (s *scripted) Fetch(_ context.Context, r message.Resource) (provider.Fetched, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return provider.Fetched{}, s.err
	}
	state, _ := json.Marshal(map[string]string{"id": r.ID, "status": s.status})
	return provider.Fetched{State: state, Status: s.status}, nil
}

type lister []string

func (l lister) ListObjects(context.Context, string, string, string, int) ([]provider.Listed, bool, error) {
	out := make([]provider.Listed, len(l))
	for i, id := range l {
		out[i].ID = id
	}
	return out, false, nil
}

type line struct{ kind, event, what string }

func lines(t explain.Timeline) []line {
	var out []line
	for _, e := range t.Entries {
		what := e.Outcome
		switch e.Kind {
		case explain.KindFetch:
			what = e.Result
		case explain.KindReconcile:
			what = e.Finding
		}
		out = append(out, line{e.Kind, e.EventID, what})
	}
	return out
}

// One resource's story, in the order it happened: a snapshot applied, an
// older one arriving late and recorded stale, a hint whose fetch succeeded,
// a hint whose fetch failed (the event left retrying) and a reconciliation
// check that found the projection diverged from the provider. Each event
// shows its arrival and provider time; the projection and access decision
// are on top. Fails if the processor stops recording fetches or failed
// fetches, if a check's finding or a write's previous state is not
// recorded, or if explain loses events, provider times or order.
func TestExplainShowsOneResourceStoryInOrder(t *testing.T) {
	t.Parallel()
	fetch := &scripted{}
	paths := provider.Paths{ResourceID: "data.id", State: "data"}
	snapPaths := paths
	snapPaths.Version = "data.version"
	p := pipelinetest.New(t, pipelinetest.Options{
		Endpoints: []provider.Endpoint{
			{ID: epSnap, Provider: provider.StandardWebhooks, SourceAccount: account, Environment: "test", Secrets: []string{secret}, Paths: snapPaths},
			{ID: epHint, Provider: provider.StandardWebhooks, SourceAccount: account, Environment: "test", Secrets: []string{secret}, Paths: paths,
				// A fetch API makes its unversioned events hints; the fetcher is the test's.
				Fetch: &provider.FetchAPI{URL: "http://127.0.0.1:1/{id}"}},
		},
		Processor: func(c *processor.Config) {
			c.Fetchers = map[string]provider.Fetcher{provider.StandardWebhooks: fetch}
			// A failed fetch stays parked for the rest of the test.
			c.BackoffBase, c.BackoffMax = time.Hour, time.Hour
		},
	})
	ctx := context.Background()
	r := message.Resource{Provider: provider.StandardWebhooks, SourceAccount: account, Environment: "test", Type: "subscription", ID: subID}
	t0 := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

	p.PostStandard(epSnap, secret, "msg_v2", t0.Add(2*time.Minute), map[string]any{"id": subID, "version": 2, "status": "active"}, typeSnap)
	p.WaitEvent("msg_v2", "processed")
	p.PostStandard(epSnap, secret, "msg_v1", t0.Add(time.Minute), map[string]any{"id": subID, "version": 1, "status": "trialing"}, typeSnap)
	p.WaitEvent("msg_v1", "processed")
	fetch.set("past_due", nil)
	p.PostStandard(epHint, secret, "msg_h1", t0.Add(3*time.Minute), map[string]any{"id": subID}, typeHint)
	p.WaitEvent("msg_h1", "processed")
	fetch.set("", errors.New("provider answered 503"))
	p.PostStandard(epHint, secret, "msg_h2", t0.Add(4*time.Minute), map[string]any{"id": subID}, typeHint)
	p.WaitEvent("msg_h2", "retrying")

	fetch.set("canceled", nil)
	rec := reconciler.New(p.Pool, p.Log, reconciler.Config{StaleAfter: time.Nanosecond, Registerer: prometheus.NewRegistry(),
		Sources: []provider.Source{{Provider: provider.StandardWebhooks, SourceAccount: account, Environment: "test",
			ResourceType: "subscription", Lister: lister{subID}}}})
	n, err := rec.RunOnce(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	p.Eventually(func() bool {
		pr, ok := p.Projection(r)
		return ok && pr.Status == "canceled"
	}, "the check writes what the provider has")

	tl, err := explain.Build(ctx, p.Pool, r, explain.Options{})
	require.NoError(t, err)
	require.Equal(t, []line{
		{explain.KindReceived, "msg_v2", ""},
		{explain.KindDecision, "msg_v2", projection.Applied},
		{explain.KindReceived, "msg_v1", ""},
		{explain.KindDecision, "msg_v1", projection.Stale},
		{explain.KindReceived, "msg_h1", ""},
		{explain.KindFetch, "msg_h1", explain.FetchSuccess},
		{explain.KindReceived, "msg_h2", ""},
		{explain.KindFetch, "msg_h2", explain.FetchError},
		{explain.KindReconcile, "", projection.Diverged},
	}, lines(tl))
	e := tl.Entries
	require.Equal(t, typeSnap, e[0].EventType)
	require.NotNil(t, e[0].ReceivedAt)
	require.NotNil(t, e[0].ProviderTime, "provider time of msg_v2")
	require.True(t, t0.Add(2*time.Minute).Equal(*e[0].ProviderTime))
	require.True(t, t0.Add(time.Minute).Equal(*e[2].ProviderTime))
	require.Equal(t, "", *e[1].PreviousStatus, "msg_v2 created the projection")
	require.Equal(t, "active", e[1].Status)
	require.Equal(t, "active", *e[3].PreviousStatus, "the stale msg_v1 met the projection msg_v2 wrote")
	require.Equal(t, "trialing", e[3].Status)
	require.Equal(t, "active", *e[5].PreviousStatus)
	require.Equal(t, "past_due", e[5].Status)
	require.Equal(t, "retrying", e[6].EventStatus)
	require.Equal(t, 1, e[6].Attempts)
	require.NotNil(t, e[6].NextAttemptAt)
	require.Contains(t, e[6].LastError, "provider answered 503")
	require.Equal(t, projection.FetchFailed, e[7].Outcome)
	require.Contains(t, e[7].Detail, "provider answered 503")
	require.Equal(t, "past_due", *e[8].PreviousStatus)
	require.Equal(t, "canceled", e[8].Status)
	require.False(t, tl.Truncated)

	require.NotNil(t, tl.Projection)
	require.Equal(t, "canceled", tl.Projection.Status)
	require.NotNil(t, tl.Access)
	require.False(t, tl.Access.Access)
	require.Equal(t, "canceled", tl.Access.Reason)

	var buf bytes.Buffer
	require.NoError(t, tl.WriteText(&buf))
	text := buf.String()
	t.Log("\n" + text)
	pos := 0
	for _, want := range []string{"no — canceled", "received", "applied", "(none) → active", "stale", "fetch success",
		"fetch error", "provider answered 503", "reconcile diverged", "projection had past_due, provider has canceled"} {
		i := strings.Index(text[pos:], want)
		require.GreaterOrEqual(t, i, 0, "%q after offset %d in:\n%s", want, pos, text)
		pos += i + len(want)
	}
	require.Contains(t, text, "provider time 2025-03-04 05:08:07.000")

	// -limit keeps the latest entries and says that older ones exist.
	tl, err = explain.Build(ctx, p.Pool, r, explain.Options{Limit: 3})
	require.NoError(t, err)
	require.True(t, tl.Truncated)
	require.Equal(t, []line{
		{explain.KindReceived, "msg_h2", ""},
		{explain.KindFetch, "msg_h2", explain.FetchError},
		{explain.KindReconcile, "", projection.Diverged},
	}, lines(tl), fmt.Sprintf("%+v", tl.Entries))
}
