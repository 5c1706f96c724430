package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/processor"
)

// person is one customer's personal values, as a provider puts them in its
// objects.
type person struct{ email, name, street string }

func (p person) values() []string { return []string{p.email, p.name, p.street} }

var (
	jane = person{"jane@example.com", "Jane Roe", "1 Main Street"}
	jim  = person{"jim@example.net", "Jim Poe", "2 Side Road"}
	bob  = person{"bob@example.org", "Bob Doe", "3 High Street"}
)

// cbPost delivers a Chargebee event to endpoint and requires a 200.
func cbPost(t *testing.T, p *pipelinetest.Pipeline, endpoint, eventID string, content map[string]any) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"id": eventID, "event_type": "subscription_changed", "occurred_at": time.Now().Unix(),
		"api_version": "v2", "object": "event", "content": content})
	require.NoError(t, err)
	h := http.Header{}
	h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth("u", "p"))
	code, resp := p.PostSigned(endpoint, body, h)
	require.Equal(t, http.StatusOK, code, resp)
}

// seedCustomer delivers, through the pipeline, a subscription snapshot at
// version and a paid invoice of who.
func seedCustomer(t *testing.T, p *pipelinetest.Pipeline, endpoint, sub, inv string, version int, who person) {
	t.Helper()
	addr := map[string]any{"email": who.email, "first_name": who.name, "line1": who.street}
	cbPost(t, p, endpoint, "ev_"+sub, map[string]any{"subscription": map[string]any{"id": sub, "customer_id": "cus_" + sub,
		"status": "active", "resource_version": version, "current_term_end": time.Now().Add(720 * time.Hour).Unix(),
		"shipping_address": addr}})
	cbPost(t, p, endpoint, "ev_"+inv, map[string]any{"invoice": map[string]any{"id": inv, "status": "paid", "total": 900,
		"customer_id": "cus_" + sub, "subscription_id": sub, "resource_version": version, "billing_address": addr}})
}

// holders returns, per table and column, how many rows hold value, over
// every text, JSON and byte column of every table of the schema.
func holders(t *testing.T, p *pipelinetest.Pipeline, value string) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := p.Pool.Query(ctx, `
SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
JOIN information_schema.tables t ON t.table_schema = c.table_schema AND t.table_name = c.table_name AND t.table_type = 'BASE TABLE'
WHERE c.table_schema = current_schema() AND c.data_type IN ('text', 'jsonb', 'json', 'character varying', 'bytea')`)
	require.NoError(t, err)
	type col struct{ table, column, typ string }
	cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (col, error) {
		var c col
		return c, r.Scan(&c.table, &c.column, &c.typ)
	})
	require.NoError(t, err)
	require.NotEmpty(t, cols)
	out := map[string]int{}
	for _, c := range cols {
		cond := fmt.Sprintf(`%s::text LIKE '%%' || $1 || '%%'`, pgx.Identifier{c.column}.Sanitize())
		if c.typ == "bytea" {
			cond = fmt.Sprintf(`position(convert_to($1, 'UTF8') in %s) > 0`, pgx.Identifier{c.column}.Sanitize())
		}
		var n int
		require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{c.table}.Sanitize()+` WHERE `+cond, value).Scan(&n))
		if n > 0 {
			out[c.table+"."+c.column] = n
		}
	}
	return out
}

func requireGone(t *testing.T, p *pipelinetest.Pipeline, who person) {
	t.Helper()
	for _, v := range who.values() {
		require.Empty(t, holders(t, p, v), "%q is still stored", v)
	}
}

func requireKept(t *testing.T, p *pipelinetest.Pipeline, who person, where ...string) {
	t.Helper()
	h := holders(t, p, who.email)
	for _, w := range where {
		require.Positive(t, h[w], "%s lost %q: %v", w, who.email, h)
	}
}

// An erasure request removes one account's personal data (or one
// customer's) from every table — inbox bodies and errors, facts, receipts'
// errors, projection states, history details, divergences, listed states,
// refused messages — found by searching every text, JSON and byte column
// of the schema for the customer's e-mail, name and street; another
// account and another customer keep theirs; the erasure is audited with its
// rows; and the erased projection still refuses a stale snapshot and
// applies a newer one. The operator here keeps the addresses in facts and
// projections (declared fields), so every table holds some before.
// Fails if any table still holds an erased value, or if the erase touches
// what it was not asked to, or forgets the version.
func TestEraseAccountRemovesPersonalDataEverywhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	eps := []provider.Endpoint{
		{ID: "cb-a", Provider: provider.Chargebee, SourceAccount: "site-a", Environment: "test", Secrets: []string{"u:p"}},
		{ID: "cb-b", Provider: provider.Chargebee, SourceAccount: "site-b", Environment: "test", Secrets: []string{"u:p"}},
	}
	p := pipelinetest.New(t, pipelinetest.Options{Endpoints: eps, Processor: func(c *processor.Config) {
		c.StateFields = []string{"shipping_address", "billing_address"}
		c.Facts = fact.Declarations{{Provider: "chargebee", Type: "invoice_paid", Fields: []string{"id", "total", "billing_address"}}}
	}})
	seedCustomer(t, p, "cb-a", "sub_jane", "inv_jane", 5, jane)
	seedCustomer(t, p, "cb-a", "sub_jim", "inv_jim", 3, jim)
	seedCustomer(t, p, "cb-b", "sub_bob", "inv_bob", 2, bob)
	p.WaitIdle()
	// What the pipeline writes only on failures, written here as it would
	// be: an error quoting a body, a divergence, a listing waiting for its
	// check, a message the broker refused.
	for _, q := range []string{
		`INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id,
    payload, status, last_error) VALUES ('chargebee', 'site-a', 'test', 'ev_dead', 'cb-a', 'subscription_changed', 'subscription', 'sub_jane',
    '{"x":"jane@example.com"}', 'dead', 'cannot read Jane Roe')`,
		`INSERT INTO projection_history (provider, source_account, environment, resource_type, resource_id, outcome, detail)
    VALUES ('chargebee', 'site-a', 'test', 'subscription', 'sub_jane', 'fetch_failed', 'HTTP 400: {"email":"jane@example.com"}')`,
		`UPDATE action SET last_error = 'HTTP 422: Jane Roe' WHERE subject_id = 'inv_jane'`,
		`UPDATE action SET last_error = 'HTTP 422: Bob Doe' WHERE subject_id = 'inv_bob'`,
		`INSERT INTO reconcile_divergence (provider, source_account, environment, resource_type, resource_id, kind, projection_says, provider_says)
    VALUES ('chargebee', 'site-a', 'test', 'subscription', 'sub_jane', 'status', 'active', 'cancelled')`,
		`INSERT INTO reconcile_listed (provider, source_account, environment, resource_type, resource_id, seq, listed_at, state)
    VALUES ('chargebee', 'site-a', 'test', 'subscription', 'sub_jane', 1, now(), '{"shipping_address":{"email":"jane@example.com","line1":"1 Main Street"}}')`,
		`INSERT INTO outbox_dead (id, message_key, message, created_at, error)
    VALUES (99, 'chargebee/site-a/test/subscription/sub_jane', '{}', now(), 'refused: 1 Main Street')`,
	} {
		_, err := p.Pool.Exec(ctx, q)
		require.NoError(t, err, q)
	}
	for _, who := range []person{jane, jim} {
		requireKept(t, p, who, "webhook_inbox_body.body", "fact.data", "projection.state")
	}
	requireKept(t, p, bob, "webhook_inbox_body.body", "fact.data", "projection.state")

	erase := func(req api.EraseRequest) api.Erased {
		var out api.Erased
		require.Equal(t, http.StatusOK, send(t, http.MethodPost, p.Ops.URL+"/v1/erase", pipelinetest.OpsToken, req, &out))
		return out
	}
	// One customer: Jim's subscription, with its invoice (its events and
	// facts are about the subscription).
	one := erase(api.EraseRequest{Provider: "chargebee", Account: "site-a", Environment: "test", Resources: []string{"sub_jim"}})
	require.EqualValues(t, 2, one.Rows["webhook_inbox"], "%v", one.Rows)
	require.EqualValues(t, 1, one.Rows["fact"], "%v", one.Rows)
	require.EqualValues(t, 1, one.Rows["projection"], "%v", one.Rows)
	requireGone(t, p, jim)
	requireKept(t, p, jane, "webhook_inbox_body.body", "fact.data", "projection.state", "reconcile_listed.state")

	// The whole account, provider and environment left open.
	all := erase(api.EraseRequest{Account: "site-a"})
	require.EqualValues(t, 1, all.Rows["fact"], "%v", all.Rows)
	require.EqualValues(t, 1, all.Rows["reconcile_divergence"], "%v", all.Rows)
	require.EqualValues(t, 1, all.Rows["reconcile_listed"], "%v", all.Rows)
	require.EqualValues(t, 1, all.Rows["outbox_dead"], "%v", all.Rows)
	requireGone(t, p, jane)
	requireKept(t, p, bob, "webhook_inbox_body.body", "fact.data", "projection.state")
	require.Equal(t, 1, rowCount(t, p, `SELECT count(*) FROM action WHERE subject_id = 'inv_bob' AND last_error LIKE '%Bob Doe%'`))

	again := erase(api.EraseRequest{Account: "site-a"})
	require.Zero(t, again.Total, "nothing left to erase: %v", again.Rows)

	// Audited, with the rows each erasure changed.
	var audited []int64
	rows, err := p.Pool.Query(ctx, `SELECT rows FROM ops_audit WHERE action = 'erase' AND actor = 'OPS_TOKEN' ORDER BY id`)
	require.NoError(t, err)
	audited, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	require.Equal(t, []int64{one.Total, all.Total, 0}, audited)

	// Ordering survives: identity, version and status stay.
	pr, ok := p.Projection(cbRes("sub_jane"))
	require.True(t, ok)
	require.JSONEq(t, `{}`, string(pr.State))
	require.EqualValues(t, 5, *pr.Version)
	require.Equal(t, "active", pr.Status)
	cbPost(t, p, "cb-a", "ev_stale", map[string]any{"subscription": map[string]any{"id": "sub_jane", "status": "cancelled",
		"resource_version": 4}})
	p.WaitIdle()
	ev, err := inbox.Get(ctx, p.Pool, inbox.Key{Provider: "chargebee", SourceAccount: "site-a", Environment: "test", EventID: "ev_stale"}, false)
	require.NoError(t, err)
	require.Equal(t, "stale", *ev.Outcome, "an erased projection still refuses an older version")
	pr, _ = p.Projection(cbRes("sub_jane"))
	require.Equal(t, "active", pr.Status)
	cbPost(t, p, "cb-a", "ev_newer", map[string]any{"subscription": map[string]any{"id": "sub_jane", "status": "cancelled",
		"resource_version": 6}})
	p.WaitIdle()
	pr, _ = p.Projection(cbRes("sub_jane"))
	require.Equal(t, "cancelled", pr.Status, "and applies a newer one")

	// A repeat of an erased event is still a repeat, and nothing runs again.
	cbPost(t, p, "cb-a", "ev_inv_jane", map[string]any{"invoice": map[string]any{"id": "inv_jane", "status": "paid", "resource_version": 5}})
	p.WaitIdle()
	require.Zero(t, rowCount(t, p, `SELECT count(*) FROM webhook_inbox WHERE event_id = 'ev_inv_jane' AND payload IS NOT NULL`))
}

func cbRes(id string) message.Resource {
	return message.Resource{Provider: "chargebee", SourceAccount: "site-a", Environment: "test", Type: "subscription", ID: id}
}

func rowCount(t *testing.T, p *pipelinetest.Pipeline, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, p.Pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}
