package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/provider"
)

const token = "ops-token"

var (
	stripeEP = &provider.Endpoint{ID: "stripe-test", Provider: provider.Stripe, SourceAccount: "acct_a", Environment: "test"}
	cbEP     = &provider.Endpoint{ID: "cb-test", Provider: provider.Chargebee, SourceAccount: "site_b", Environment: "live"}
)

func stripeKey(id string) inbox.Key {
	return inbox.Key{Provider: provider.Stripe, SourceAccount: "acct_a", Environment: "test", EventID: id}
}

// send calls the API with a JSON body (nil: none) and decodes the answer
// into out when given.
func send(t *testing.T, method, url, tok string, body any, out any) int {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	if out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

// seedDeadEvents stores three dead events (two Stripe types, one
// Chargebee) and one processed one.
func seedDeadEvents(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rec := func(ep *provider.Endpoint, id, typ, sub string) *inbox.Record {
		return &inbox.Record{Endpoint: ep, Event: provider.Event{ID: id, Type: typ, ResourceType: "subscription", ResourceID: sub,
			Payload: []byte(`{"id":"` + id + `"}`)}}
	}
	_, err := inbox.Insert(t.Context(), pool, []*inbox.Record{
		rec(stripeEP, "evt_1", "invoice.paid", "sub_1"),
		rec(stripeEP, "evt_2", "customer.subscription.updated", "sub_1"),
		rec(cbEP, "cb_1", "subscription_changed", "cb_sub"),
		rec(stripeEP, "evt_ok", "customer.subscription.updated", "sub_2"),
	}, time.Now())
	require.NoError(t, err)
	for _, q := range []string{
		`DELETE FROM outbox`,
		`UPDATE webhook_inbox SET status = 'dead', attempts = 5, last_error = 'stripe answered 500', processed_at = now() WHERE event_id <> 'evt_ok'`,
		`UPDATE webhook_inbox SET received_at = now() - interval '2 days' WHERE event_id = 'evt_1'`,
		`UPDATE webhook_inbox SET status = 'processed', processed_at = now() WHERE event_id = 'evt_ok'`,
		`INSERT INTO projection_history (provider, source_account, environment, resource_type, resource_id, event_id, outcome, detail)
		 VALUES ('stripe', 'acct_a', 'test', 'subscription', 'sub_1', 'evt_2', 'fetch_failed', 'stripe answered 500'),
		        ('stripe', 'acct_a', 'test', 'subscription', 'sub_1', 'evt_other', 'fetched', '')`,
	} {
		_, err := pool.Exec(t.Context(), q)
		require.NoError(t, err)
	}
}

func TestDeadRoutesRequireTheBearerToken(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token}))
	t.Cleanup(srv.Close)
	for _, tok := range []string{"", "wrong"} {
		require.Equal(t, http.StatusUnauthorized, send(t, http.MethodGet, srv.URL+"/v1/dead", tok, nil, nil))
		require.Equal(t, http.StatusUnauthorized, send(t, http.MethodGet, srv.URL+"/v1/dead/stripe/acct_a/test/evt_1", tok, nil, nil))
		require.Equal(t, http.StatusUnauthorized, send(t, http.MethodPost, srv.URL+"/v1/dead/replay", tok, map[string]any{}, nil))
		require.Equal(t, http.StatusUnauthorized, send(t, http.MethodPost, srv.URL+"/v1/replay/partition", tok, map[string]any{"partition": 0, "from_offset": 0}, nil))
	}
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/dead", token, nil, nil))
}

// GET /v1/dead answers what inbox.ListDead (and so `hookyard dead list`)
// answers for the same filters.
func TestListDeadRouteFiltersLikeTheCommand(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	seedDeadEvents(t, s.Pool)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token}))
	t.Cleanup(srv.Close)

	for query, f := range map[string]inbox.DeadFilter{
		"":                                    {},
		"?provider=stripe":                    {Provider: provider.Stripe},
		"?account=site_b&environment=live":    {SourceAccount: "site_b", Environment: "live"},
		"?type=customer.subscription.updated": {EventType: "customer.subscription.updated"},
		"?resource_type=subscription&resource_id=sub_1&since=24h": {ResourceType: "subscription", ResourceID: "sub_1", Since: time.Now().Add(-24 * time.Hour)},
		"?limit=1": {Limit: 1},
	} {
		var got struct {
			Events []map[string]any `json:"events"`
			Count  int              `json:"count"`
		}
		require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/dead"+query, token, nil, &got), query)
		rows, err := inbox.ListDead(t.Context(), s.Pool, f)
		require.NoError(t, err)
		b, err := json.Marshal(rows)
		require.NoError(t, err)
		var want []map[string]any
		require.NoError(t, json.Unmarshal(b, &want))
		if want == nil {
			want = []map[string]any{}
		}
		require.Equal(t, want, got.Events, query)
		require.Equal(t, len(rows), got.Count, query)
	}
	var got struct {
		Events []inbox.Row `json:"events"`
	}
	send(t, http.MethodGet, srv.URL+"/v1/dead?type=customer.subscription.updated", token, nil, &got)
	require.Len(t, got.Events, 1)
	ev := got.Events[0]
	require.Equal(t, "evt_2", ev.EventID)
	require.Equal(t, 5, ev.Attempts)
	require.Equal(t, "stripe answered 500", *ev.LastError)
	require.Equal(t, "sub_1", ev.ResourceID)
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodGet, srv.URL+"/v1/dead?since=yesterday", token, nil, nil))
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodGet, srv.URL+"/v1/dead?limit=-1", token, nil, nil))
}

func TestShowDeadRouteGivesTheEventItsPayloadAndItsHistory(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	seedDeadEvents(t, s.Pool)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token}))
	t.Cleanup(srv.Close)

	var got api.DeadEvent
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/dead/stripe/acct_a/test/evt_2?payload=true", token, nil, &got))
	require.Equal(t, inbox.StatusDead, got.Event.Status)
	require.Equal(t, "customer.subscription.updated", got.Event.EventType)
	require.JSONEq(t, `{"id":"evt_2"}`, string(got.Event.Payload))
	require.Len(t, got.History, 1, "only the event's own entries")
	require.Equal(t, "fetch_failed", got.History[0].Outcome)
	require.Equal(t, "stripe answered 500", got.History[0].Detail)

	want, err := api.ShowEvent(t.Context(), s.Pool, stripeKey("evt_2"), false)
	require.NoError(t, err)
	got = api.DeadEvent{}
	send(t, http.MethodGet, srv.URL+"/v1/dead/stripe/acct_a/test/evt_2", token, nil, &got)
	require.Empty(t, got.Event.Payload)
	require.Equal(t, want.Event.EventID, got.Event.EventID)
	require.Equal(t, want.Event.Attempts, got.Event.Attempts)

	require.Equal(t, http.StatusNotFound, send(t, http.MethodGet, srv.URL+"/v1/dead/stripe/acct_a/test/evt_nope", token, nil, nil))
}

func TestReplayDeadRouteReplaysOneOrAFilteredSetAndRefusesALiveEvent(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	seedDeadEvents(t, s.Pool)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/v1/dead/replay"
	status := func(k inbox.Key) string {
		r, err := inbox.Get(t.Context(), s.Pool, k, false)
		require.NoError(t, err)
		return r.Status
	}

	var fail struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.Equal(t, http.StatusConflict, send(t, http.MethodPost, url, token,
		map[string]any{"provider": "stripe", "account": "acct_a", "environment": "test", "event_id": "evt_ok"}, &fail))
	require.Equal(t, "not_dead", fail.Error.Code)
	require.Contains(t, fail.Error.Message, "status processed")
	require.Equal(t, inbox.StatusProcessed, status(stripeKey("evt_ok")))
	require.Equal(t, http.StatusNotFound, send(t, http.MethodPost, url, token,
		map[string]any{"provider": "stripe", "account": "acct_a", "environment": "test", "event_id": "evt_nope"}, nil))
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, url, token, map[string]any{"event_id": "evt_1"}, nil))
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, url, token, map[string]any{"evnet_type": "x"}, nil),
		"a misspelt filter is refused, not ignored")

	var ok struct {
		Replayed int `json:"replayed"`
	}
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, url, token,
		map[string]any{"provider": "stripe", "account": "acct_a", "environment": "test", "event_id": "evt_1"}, &ok))
	require.Equal(t, 1, ok.Replayed)
	require.Equal(t, inbox.StatusPending, status(stripeKey("evt_1")))

	// Filters: only the Stripe subscription update, not the Chargebee one.
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, url, token,
		map[string]any{"provider": "stripe", "type": "customer.subscription.updated", "since": "1h"}, &ok))
	require.Equal(t, 1, ok.Replayed)
	require.Equal(t, inbox.StatusPending, status(stripeKey("evt_2")))
	cb, err := inbox.Get(t.Context(), s.Pool, inbox.Key{Provider: provider.Chargebee, SourceAccount: "site_b", Environment: "live", EventID: "cb_1"}, false)
	require.NoError(t, err)
	require.Equal(t, inbox.StatusDead, cb.Status)
	var n int
	require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox WHERE message::jsonb->>'reason' = 'replay'`).Scan(&n))
	require.Equal(t, 2, n)
}

// POST /v1/replay/partition runs the same replay as the command and
// answers the same report; a partition out of range is a 400 naming the
// partition count.
func TestReplayPartitionRouteAnswersTheReplayReport(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 2)
	s := dbtest.New(t)
	seedDeadEvents(t, s.Pool)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...), kgo.DefaultProduceTopic(kc.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	for _, id := range []string{"evt_1", "evt_ok", "evt_gone"} {
		b, err := json.Marshal(message.Message{Kind: message.KindEvent, Resource: message.Resource{Provider: "stripe", SourceAccount: "acct_a",
			Environment: "test", Type: "subscription", ID: "sub_1"}, EventID: id})
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Partition: 1, Value: b}).FirstErr())
	}
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token, Brokers: kc.Brokers, Topic: kc.Topic}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/v1/replay/partition"

	var got struct{ Job job.Job }
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, url, token, map[string]any{"partition": 1, "from_offset": 1}, &got))
	require.Equal(t, job.StatusDone, got.Job.Status, "a small replay is done within its first step")
	require.Equal(t, int64(2), got.Job.Progress["read"])
	require.Equal(t, int64(1), got.Job.Progress["replayed_events"])
	require.Equal(t, int64(1), got.Job.Progress["skipped_"+inbox.SkipNotInInbox])
	require.Equal(t, inbox.StatusPending, func() string {
		r, err := inbox.Get(t.Context(), s.Pool, stripeKey("evt_ok"), false)
		require.NoError(t, err)
		return r.Status
	}())
	var again struct{ Job job.Job }
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, fmt.Sprintf("%s/v1/jobs/%d", srv.URL, got.Job.ID), token, nil, &again))
	require.Equal(t, got.Job.Progress, again.Job.Progress)

	var fail struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, url, token, map[string]any{"partition": 2, "from_offset": 0}, &fail))
	require.Contains(t, fail.Error.Message, "has 2 partitions")
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, url, token, map[string]any{"from_offset": 0}, nil), "partition is required")
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, url, token, map[string]any{"partition": 0}, nil), "from_offset or since")
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, url, token, map[string]any{"partition": 0, "since": "last week"}, nil))
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, url, token, map[string]any{"partition": 1, "since": "1h"}, &got))
	require.Equal(t, int64(3), got.Job.Progress["read"])

	bare := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token}))
	t.Cleanup(bare.Close)
	require.Equal(t, http.StatusServiceUnavailable, send(t, http.MethodPost, bare.URL+"/v1/replay/partition", token, map[string]any{"partition": 0, "from_offset": 0}, nil))
}

// Bounds an operator's typo should not get past: a since in the future or
// before 1970, a limit above MaxLimit, and an API built without a token
// (every request refused, never "empty bearer matches empty token").
func TestOpsAPIRefusesOutOfBoundsRequests(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	seedDeadEvents(t, s.Pool)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token}))
	t.Cleanup(srv.Close)
	for _, q := range []string{"?since=-2h", "?since=0s", "?since=1960-01-01T00:00:00Z", "?since=2999-01-01T00:00:00Z",
		fmt.Sprintf("?limit=%d", api.MaxLimit+1)} {
		require.Equal(t, http.StatusBadRequest, send(t, http.MethodGet, srv.URL+"/v1/dead"+q, token, nil, nil), q)
	}
	require.Equal(t, http.StatusBadRequest,
		send(t, http.MethodPost, srv.URL+"/v1/dead/replay", token, map[string]any{"limit": api.MaxLimit + 1}, nil))
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/dead?since=24h", token, nil, nil))
	// Every list and filtered replay reads limit and since the same way and
	// names what was wrong.
	type apiError struct {
		Error struct{ Code string } `json:"error"`
	}
	for _, path := range []string{"/v1/dead", "/v1/actions", "/v1/parked"} {
		for _, q := range []string{"?limit=0", "?limit=abc", "?limit=-1", fmt.Sprintf("?limit=%d", api.MaxLimit+1)} {
			var e apiError
			require.Equal(t, http.StatusBadRequest, send(t, http.MethodGet, srv.URL+path+q, token, nil, &e), path+q)
			require.Equal(t, "bad_limit", e.Error.Code, path+q)
		}
		require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+path+"?limit=10", token, nil, nil), path)
	}
	for _, path := range []string{"/v1/dead", "/v1/actions"} {
		var e apiError
		require.Equal(t, http.StatusBadRequest, send(t, http.MethodGet, srv.URL+path+"?since=yesterday", token, nil, &e), path)
		require.Equal(t, "bad_since", e.Error.Code, path)
	}
	for _, path := range []string{"/v1/dead/replay", "/v1/actions/replay"} {
		var e apiError
		require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, srv.URL+path, token, map[string]any{"limit": -1}, &e), path)
		require.Equal(t, "bad_limit", e.Error.Code, path)
		require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, srv.URL+path, token, map[string]any{"since": "yesterday"}, &e), path)
		require.Equal(t, "bad_since", e.Error.Code, path)
	}

	open := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{}))
	t.Cleanup(open.Close)
	req, err := http.NewRequest(http.MethodGet, open.URL+"/v1/dead", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer ")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
}
