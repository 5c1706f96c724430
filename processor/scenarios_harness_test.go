package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/internal/testkit/promread"
	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

func scEndpoints() []provider.Endpoint {
	paths := provider.Paths{ResourceID: "data.id", Version: "data.version", State: "data"}
	return []provider.Endpoint{
		{ID: scCB, Provider: provider.Chargebee, SourceAccount: scCBSite, Environment: "test", Secrets: []string{"u:p"}},
		{ID: scSW, Provider: provider.StandardWebhooks, SourceAccount: scSWAcct, Environment: "test",
			Secrets: []string{scSWSecret}, Paths: paths},
		{ID: scSWInc, Provider: provider.StandardWebhooks, SourceAccount: scSWIncAc, Environment: "test",
			Secrets: []string{scSWSecret}, Paths: paths, Incremental: true},
	}
}

func scNew(t *testing.T, opts pipelinetest.Options) *pipelinetest.Pipeline {
	t.Helper()
	opts.Endpoints = append(scEndpoints(), opts.Endpoints...)
	return pipelinetest.New(t, opts)
}

func scCBRes(id string) message.Resource {
	return message.Resource{Provider: provider.Chargebee, SourceAccount: scCBSite, Environment: "test", Type: "subscription", ID: id}
}

func scCBKey(eventID string) inbox.Key {
	return inbox.Key{Provider: provider.Chargebee, SourceAccount: scCBSite, Environment: "test", EventID: eventID}
}

func scStripeKey(eventID string) inbox.Key {
	return inbox.Key{Provider: provider.Stripe, SourceAccount: pipelinetest.StripeAccount, Environment: "test", EventID: eventID}
}

// scCBEvent is a Chargebee event about one subscription snapshot.
func scCBEvent(eventID, eventType, subID, status string, version, occurredAt int64) []byte {
	b, err := json.Marshal(map[string]any{
		"id": eventID, "event_type": eventType, "occurred_at": occurredAt, "api_version": "v2", "object": "event",
		"content": map[string]any{"subscription": map[string]any{
			"id": subID, "customer_id": "cus_" + subID, "status": status, "resource_version": version,
			"current_term_end": time.Now().Add(30 * 24 * time.Hour).Unix(),
		}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

func scPostCB(t *testing.T, p *pipelinetest.Pipeline, body []byte) {
	t.Helper()
	h := http.Header{}
	h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth("u", "p"))
	code, resp := p.PostSigned(scCB, body, h)
	require.Equal(t, http.StatusOK, code, resp)
}

func scPostSW(t *testing.T, p *pipelinetest.Pipeline, endpointID, msgID string, body []byte) {
	t.Helper()
	h, err := standardwebhooks.Sign(scSWSecret, msgID, time.Now(), body)
	require.NoError(t, err)
	code, resp := p.PostSigned(endpointID, body, h)
	require.Equal(t, http.StatusOK, code, resp)
}

func scSend(t *testing.T, p *pipelinetest.Pipeline, eventType string, obj any) string {
	t.Helper()
	id, code, err := p.Sim.Send(context.Background(), eventType, obj)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	return id
}

func scInbox(t *testing.T, p *pipelinetest.Pipeline, k inbox.Key) inbox.Row {
	t.Helper()
	r, err := inbox.Get(context.Background(), p.Pool, k, false)
	require.NoError(t, err)
	return r
}

// scWaitStatus waits until the event is finished (processed, dead or
// ignored) and requires that it finished as status.
func scWaitStatus(t *testing.T, p *pipelinetest.Pipeline, k inbox.Key, status string) inbox.Row {
	t.Helper()
	var r inbox.Row
	p.Eventually(func() bool {
		var err error
		r, err = inbox.Get(context.Background(), p.Pool, k, false)
		return err == nil && r.Status != inbox.StatusPending && r.Status != inbox.StatusRetrying
	}, "event %s finishes", k.EventID)
	require.Equal(t, status, r.Status, "event %s: %+v", k.EventID, r)
	return r
}

// scCounterTotal sums a counter over its labels (0 when absent).
func scCounterTotal(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func scHistory(t *testing.T, p *pipelinetest.Pipeline, r message.Resource) []projection.HistoryEntry {
	t.Helper()
	h, err := projection.History(context.Background(), p.Pool, r, 100)
	require.NoError(t, err)
	return h
}

func scHistoryOf(h []projection.HistoryEntry, eventID string) []projection.HistoryEntry {
	var out []projection.HistoryEntry
	for _, e := range h {
		if e.EventID == eventID {
			out = append(out, e)
		}
	}
	return out
}

func scProjection(t *testing.T, p *pipelinetest.Pipeline, r message.Resource) projection.Projection {
	t.Helper()
	pr, ok := p.Projection(r)
	require.True(t, ok, "no projection for %s", r.Key())
	return pr
}

// scAccess asks the ops API for any provider's access decision.
func scAccess(t *testing.T, p *pipelinetest.Pipeline, r message.Resource) access.Decision {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/access/%s/%s/%s/%s", p.Ops.URL, r.Provider, r.SourceAccount, r.Environment, r.ID), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+pipelinetest.OpsToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var d access.Decision
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&d))
	return d
}

// scCounter reads one labelled counter from reg (0 when absent).
func scCounter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	v, _, err := promread.Sum(reg, name, map[string]string{label: value})
	require.NoError(t, err)
	return v
}

// scCounterReaches waits for a labelled counter to reach want and checks it
// stays there: the processor counts after its transaction commits, so a test
// that saw the commit may look a moment before the count.
func scCounterReaches(t *testing.T, reg *prometheus.Registry, name, label, value string, want float64) {
	t.Helper()
	require.Eventually(t, func() bool { return scCounter(t, reg, name, label, value) >= want }, 10*time.Second, 10*time.Millisecond,
		"%s{%s=%q} never reached %v", name, label, value, want)
	require.Equal(t, want, scCounter(t, reg, name, label, value))
}

func scCount(t *testing.T, p *pipelinetest.Pipeline, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, p.Pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func scSub(id, status string) stripesim.Subscription {
	return stripesim.Subscription{ID: id, Customer: "cus_" + id, Status: status,
		CurrentPeriodEnd: time.Now().Add(30 * 24 * time.Hour).Unix()}
}
