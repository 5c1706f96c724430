package processor_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/processor"
)

// personal are values a provider puts in its objects that no decision and
// no recovery needs: none may reach a table but the inbox (until purged).
var personal = []string{"jane@example.com", "Jane Roe", "1 Main Street"}

func requireNoPersonal(t *testing.T, p *pipelinetest.Pipeline, table, column string) {
	t.Helper()
	for _, v := range personal {
		require.Zero(t, scCount(t, p, `SELECT count(*) FROM `+table+` WHERE `+column+`::text LIKE '%' || $1 || '%'`, v),
			"%s.%s holds %q", table, column, v)
	}
}

func cbEvent(t *testing.T, eventID string, content map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"id": eventID, "event_type": "subscription_changed", "occurred_at": time.Now().Unix(),
		"api_version": "v2", "object": "event", "content": content})
	require.NoError(t, err)
	return b
}

// Invariant 15 for facts: a fact keeps the fields its declaration names
// (amount, currency, customer id, subscription, paid time), not the
// provider's whole object; a configured declaration replaces the default
// of its provider and type. Fails if fact.data keeps the invoice as sent.
func TestFactKeepsOnlyDeclaredFields(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) {
		c.Facts = fact.Declarations{{Provider: "chargebee", Type: "invoice_paid", Fields: []string{"id", "total", "currency_code"}}}
	}})
	inv := map[string]any{"id": "in_min", "object": "invoice", "subscription": "sub_min", "status": "paid",
		"amount_paid": 900, "currency": "eur", "customer": "cus_min",
		"customer_email": personal[0], "customer_name": personal[1],
		"customer_address":   map[string]any{"line1": personal[2], "city": "Springfield"},
		"status_transitions": map[string]any{"paid_at": 1700000000, "finalized_at": 1699999000},
		"lines":              map[string]any{"data": []any{map[string]any{"description": "Gold plan for " + personal[1]}}}}
	scSend(t, p, "invoice.paid", inv)
	scPostCB(t, p, cbEvent(t, "ev_cb_inv", map[string]any{"invoice": map[string]any{"id": "cb_inv_min", "status": "paid",
		"total": 1200, "currency_code": "USD", "customer_id": "cb_cus", "resource_version": 3,
		"billing_address": map[string]any{"email": personal[0], "first_name": "Jane", "line1": personal[2]}}}))
	p.WaitIdle()

	data := func(id string) string {
		var d string
		require.NoError(t, p.Pool.QueryRow(t.Context(), `SELECT data::text FROM fact WHERE fact_id = $1`, id).Scan(&d))
		return d
	}
	require.JSONEq(t, `{"id":"in_min","object":"invoice","status":"paid","amount_paid":900,"currency":"eur","customer":"cus_min",
		"subscription":"sub_min","status_transitions":{"paid_at":1700000000}}`, data("in_min"), "the default Stripe declaration")
	require.JSONEq(t, `{"id":"cb_inv_min","total":1200,"currency_code":"USD"}`, data("cb_inv_min"), "the configured declaration")
	requireNoPersonal(t, p, "fact", "data")
	requireNoPersonal(t, p, "projection", "state") // Chargebee's invoice is projected too
}

// Invariant 15 for projections: a projection's state keeps the fields a
// decision reads and the configured ones, nothing else, and the same
// snapshot delivered again is still a duplicate (the kept state is the same
// bytes every time). Fails if state keeps the provider's object whole, or
// if keeping is not deterministic (the copy would park as a conflict).
func TestProjectionStateKeepsOnlyDecisionAndDeclaredFields(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) {
		c.StateFields = []string{"meta_data.plan"}
	}})
	end := time.Now().Add(30 * 24 * time.Hour).Unix()
	sub := map[string]any{"id": "sub_min", "customer_id": "cb_cus", "status": "active", "resource_version": 7,
		"current_term_end": end, "meta_data": map[string]any{"plan": "gold", "note": "call " + personal[1]},
		"shipping_address": map[string]any{"email": personal[0], "first_name": "Jane", "line1": personal[2]}}
	scPostCB(t, p, cbEvent(t, "ev_min_1", map[string]any{"subscription": sub}))
	p.WaitIdle()
	pr := scProjection(t, p, scCBRes("sub_min"))
	require.JSONEq(t, `{"id":"sub_min","customer_id":"cb_cus","status":"active","resource_version":7,"current_term_end":`+
		json.Number(itoa(end)).String()+`,"meta_data":{"plan":"gold"}}`, string(pr.State))
	requireNoPersonal(t, p, "projection", "state")
	require.True(t, scAccess(t, p, scCBRes("sub_min")).Access)

	scPostCB(t, p, cbEvent(t, "ev_min_2", map[string]any{"subscription": sub}))
	p.WaitIdle()
	require.Equal(t, "duplicate", *scInbox(t, p, scCBKey("ev_min_2")).Outcome)
	require.False(t, scProjection(t, p, scCBRes("sub_min")).NeedsReconcile)
	require.Equal(t, inbox.StatusProcessed, scInbox(t, p, scCBKey("ev_min_2")).Status)
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
