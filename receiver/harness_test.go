package receiver_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/receiver"
)

const (
	stripeSecret  = "whsec_receiver_test_stripe"
	chargebeeUser = "hookyard"
	chargebeePass = "chargebee-test-password"
	githubSecret  = "receiver-test-github-secret"
)

var standardSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("receiver-test-standard-key-0123"))

// endpoints are the endpoints every test receiver serves. Each test has its
// own schema, so they never see each other's rows.
func endpoints() []provider.Endpoint {
	return []provider.Endpoint{
		{ID: "stripe-test", Provider: provider.Stripe, SourceAccount: "acct_owner", Environment: "test", Secrets: []string{stripeSecret}},
		{ID: "stripe-other", Provider: provider.Stripe, SourceAccount: "acct_other", Environment: "test", Secrets: []string{stripeSecret}},
		{ID: "stripe-allow", Provider: provider.Stripe, SourceAccount: "acct_owner", Environment: "test", Secrets: []string{stripeSecret},
			EventTypes: []string{"customer.subscription.*"}},
		{ID: "chargebee-test", Provider: provider.Chargebee, SourceAccount: "site_owner", Environment: "test",
			Secrets: []string{chargebeeUser + ":" + chargebeePass}},
		{ID: "github-prod", Provider: provider.GitHub, SourceAccount: "org_owner", Environment: "prod", Secrets: []string{githubSecret}},
		{ID: "standard-test", Provider: provider.StandardWebhooks, SourceAccount: "sender_owner", Environment: "test",
			Secrets: []string{standardSecret}, Paths: provider.Paths{ResourceID: "data.id", Version: "data.version"}},
	}
}

func discardLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// bundle is one test's receiver, its HTTP server and its database.
type bundle struct {
	pool   *pgxpool.Pool
	rcv    *receiver.Receiver
	url    string
	client *http.Client
}

// setup gives the test its own schema and a receiver on a real listener.
func setup(t *testing.T, cfg receiver.Config) *bundle {
	t.Helper()
	return serve(t, dbtest.New(t).Pool, cfg)
}

func serve(t *testing.T, pool *pgxpool.Pool, cfg receiver.Config) *bundle {
	t.Helper()
	if cfg.Endpoints == nil {
		cfg.Endpoints = endpoints()
	}
	rcv, err := receiver.New(pool, discardLog(), cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(rcv.Handler())
	t.Cleanup(func() {
		srv.Close()
		rcv.Stop()
	})
	return &bundle{pool: pool, rcv: rcv, url: srv.URL, client: srv.Client()}
}

// delivery is one HTTP attempt.
type delivery struct {
	endpoint    string
	contentType string // defaults to application/json
	header      http.Header
	body        []byte
	chunked     bool // send without Content-Length
}

// answer is a response body: acceptance or refusal.
type answer struct {
	Status  string `json:"status"`
	EventID string `json:"event_id"`
	Kept    bool   `json:"kept"`
	Error   struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type response struct {
	code   int
	header http.Header
	answer answer
	raw    []byte
}

func (b *bundle) do(ctx context.Context, d delivery) (response, error) {
	var body io.Reader = bytes.NewReader(d.body)
	if d.chunked {
		body = io.MultiReader(bytes.NewReader(d.body)) // hides the length
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/webhooks/"+d.endpoint, body)
	if err != nil {
		return response{}, err
	}
	if d.chunked {
		req.ContentLength = -1
		req.TransferEncoding = []string{"chunked"}
	}
	for k, vs := range d.header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", cmpOr(d.contentType, "application/json"))
	res, err := b.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	out := response{code: res.StatusCode, header: res.Header, raw: raw}
	if err := json.Unmarshal(raw, &out.answer); err != nil {
		return out, fmt.Errorf("response %d is not JSON: %q", res.StatusCode, raw)
	}
	return out, nil
}

func (b *bundle) post(t *testing.T, d delivery) response {
	t.Helper()
	res, err := b.do(t.Context(), d)
	require.NoError(t, err)
	return res
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// stripeBody is a Stripe subscription event; extra overrides top-level fields.
func stripeBody(id, typ, sub string, extra map[string]any) []byte {
	m := map[string]any{
		"id": id, "object": "event", "type": typ, "livemode": false, "api_version": "2024-06-20",
		"data": map[string]any{"object": map[string]any{"id": sub, "object": "subscription", "status": "active"}},
	}
	maps.Copy(m, extra)
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func stripeHeader(body []byte, secret string, at time.Time) http.Header {
	h := http.Header{}
	h.Set(stripe.SignatureHeader, stripe.Sign(body, secret, at))
	return h
}

func stripeDelivery(endpoint string, body []byte) delivery {
	return delivery{endpoint: endpoint, header: stripeHeader(body, stripeSecret, time.Now()), body: body}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

func requireNothingStored(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	require.Zero(t, count(t, pool, `SELECT count(*) FROM webhook_inbox`), "webhook_inbox rows")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM outbox`), "outbox rows")
}

type inboxRow struct {
	Provider, SourceAccount, Environment, EventID, EventType, Status string
	ResourceType, ResourceID                                         string
	LastError                                                        *string
	// Body is the stored body (webhook_inbox_body), nil when none.
	Body []byte
}

func inboxRows(t *testing.T, pool *pgxpool.Pool) []inboxRow {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT provider, source_account, environment, event_id, event_type, status,
	    resource_type, resource_id, last_error,
	    (SELECT b.body FROM webhook_inbox_body b WHERE b.provider = w.provider AND b.source_account = w.source_account
	       AND b.environment = w.environment AND b.event_id = w.event_id AND b.stored_at = w.body_at)
	  FROM webhook_inbox w ORDER BY received_at, event_id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []inboxRow
	for rows.Next() {
		var r inboxRow
		require.NoError(t, rows.Scan(&r.Provider, &r.SourceAccount, &r.Environment, &r.EventID, &r.EventType, &r.Status,
			&r.ResourceType, &r.ResourceID, &r.LastError, &r.Body))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

type outboxRow struct {
	Key     string
	Message map[string]any
}

func outboxRows(t *testing.T, pool *pgxpool.Pool) []outboxRow {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT message_key, message::jsonb FROM outbox ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []outboxRow
	for rows.Next() {
		var r outboxRow
		require.NoError(t, rows.Scan(&r.Key, &r.Message))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// requireStoredOnce checks the one inbox row and its one outbox row of an
// accepted event.
func requireStoredOnce(t *testing.T, pool *pgxpool.Pool, prov, account, env, eventID, messageKey string) {
	t.Helper()
	rows := inboxRows(t, pool)
	require.Len(t, rows, 1)
	r := rows[0]
	require.Equal(t, prov, r.Provider)
	require.Equal(t, account, r.SourceAccount)
	require.Equal(t, env, r.Environment)
	require.Equal(t, eventID, r.EventID)
	require.Equal(t, "pending", r.Status)

	out := outboxRows(t, pool)
	require.Len(t, out, 1)
	require.Equal(t, messageKey, out[0].Key)
	require.Equal(t, "event", out[0].Message["kind"])
	require.Equal(t, eventID, out[0].Message["event_id"])
	require.Equal(t, account, out[0].Message["source_account"])
	require.Equal(t, env, out[0].Message["environment"])
}
