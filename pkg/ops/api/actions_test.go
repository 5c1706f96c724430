package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/ops/explain"
)

// seedActions records three paid invoices of sub_1 and their receipts: one
// dead, one pending, one sent.
func seedActions(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO fact (provider, source_account, environment, fact_type, fact_id, resource_type, resource_id, event_id, data)
SELECT 'stripe', 'acct_a', 'test', 'invoice_paid', id, 'subscription', 'sub_1', 'evt_' || id, jsonb_build_object('id', id)
FROM unnest(ARRAY['in_dead', 'in_pending', 'in_sent']) id;
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, attempts, last_error, done_at)
VALUES ('stripe', 'acct_a', 'test', 'in_dead', 'receipt', 'evt_in_dead', 'dead', 3, 'attempt 3: HTTP 400', now()),
       ('stripe', 'acct_a', 'test', 'in_pending', 'receipt', 'evt_in_pending', 'pending', 0, NULL, NULL),
       ('stripe', 'acct_a', 'test', 'in_sent', 'receipt', 'evt_in_sent', 'sent', 1, NULL, now())`)
	require.NoError(t, err)
}

// Dead actions are listed, shown and replayed under /v1/actions like dead
// events: a replay of a sent action is refused (409), a pending one says
// why it waits, and explain lists a subscription's receipts. Fails if a
// route is missing, unauthenticated, or replays what is not dead.
func TestActionsListedShownAndReplayedOverTheAPI(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	seedActions(t, s.Pool)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token,
		ActionsWaiting: map[string]string{action.KindReceipt: effects.ReasonNoURL}}))
	t.Cleanup(srv.Close)

	require.Equal(t, http.StatusUnauthorized, send(t, http.MethodGet, srv.URL+"/v1/actions", "", nil, nil))
	var l struct {
		Actions []action.Action `json:"actions"`
		Count   int             `json:"count"`
	}
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/actions?provider=stripe&since=1h", token, nil, &l))
	require.Equal(t, 1, l.Count)
	require.Equal(t, "in_dead", l.Actions[0].SubjectID)
	require.Equal(t, "hookyard:stripe:acct_a:test:in_dead:receipt", l.Actions[0].IdempotencyKey)
	require.Equal(t, "attempt 3: HTTP 400", l.Actions[0].LastError)
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/actions?status=pending", token, nil, &l))
	require.Equal(t, "in_pending", l.Actions[0].SubjectID)

	var sh action.Shown
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/actions/stripe/acct_a/test/in_pending/receipt", token, nil, &sh))
	require.Equal(t, effects.ReasonNoURL, sh.Waiting)
	require.NotNil(t, sh.Fact)
	require.Equal(t, "sub_1", sh.Fact.ResourceID)
	require.Equal(t, http.StatusNotFound, send(t, http.MethodGet, srv.URL+"/v1/actions/stripe/acct_a/test/in_x/receipt", token, nil, nil))

	key := func(sub string) map[string]any {
		return map[string]any{"provider": "stripe", "account": "acct_a", "environment": "test", "subject": sub, "kind": "receipt"}
	}
	require.Equal(t, http.StatusConflict, send(t, http.MethodPost, srv.URL+"/v1/actions/replay", token, key("in_sent"), nil))
	require.Equal(t, http.StatusNotFound, send(t, http.MethodPost, srv.URL+"/v1/actions/replay", token, key("in_x"), nil))
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, srv.URL+"/v1/actions/replay", token, map[string]any{"subjet": "x"}, nil))
	var rep struct {
		Replayed int `json:"replayed"`
	}
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, srv.URL+"/v1/actions/replay", token, key("in_dead"), &rep))
	require.Equal(t, 1, rep.Replayed)
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/actions/stripe/acct_a/test/in_dead/receipt", token, nil, &sh))
	require.Equal(t, action.StatusPending, sh.Action.Status)
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, srv.URL+"/v1/actions/replay", token, map[string]any{"kind": "receipt"}, &rep))
	require.Zero(t, rep.Replayed, "nothing dead is left")

	var tl explain.Timeline
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/explain/stripe/acct_a/test/subscription/sub_1", token, nil, &tl))
	require.Len(t, tl.Actions, 3)
	waiting := map[string]string{}
	for _, a := range tl.Actions {
		waiting[a.SubjectID] = a.Waiting
	}
	require.Equal(t, map[string]string{"in_dead": effects.ReasonNoURL, "in_pending": effects.ReasonNoURL, "in_sent": ""}, waiting)
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/explain/stripe/acct_a/test/invoice/in_sent", token, nil, &tl),
		"an invoice with a receipt is explained, though it has no events of its own")
	require.Len(t, tl.Actions, 1)
}

// A dead action is skipped over the API with the operate scope, audited
// with its reason; anything not dead is refused (409) and a skipped one is
// not replayed. Fails if the route is missing or skips what is not dead.
func TestDeadActionSkippedOverTheAPIAndAudited(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	seedActions(t, s.Pool)
	srv := httptest.NewServer(api.New(s.Pool, pipelinetest.Logger(t), api.Config{Token: token}))
	t.Cleanup(srv.Close)
	key := func(sub string) map[string]any {
		return map[string]any{"provider": "stripe", "account": "acct_a", "environment": "test", "subject": sub, "kind": "receipt",
			"reason": "customer refunded by hand"}
	}
	require.Equal(t, http.StatusUnauthorized, send(t, http.MethodPost, srv.URL+"/v1/actions/skip", "", key("in_dead"), nil))
	require.Equal(t, http.StatusConflict, send(t, http.MethodPost, srv.URL+"/v1/actions/skip", token, key("in_pending"), nil))
	require.Equal(t, http.StatusConflict, send(t, http.MethodPost, srv.URL+"/v1/actions/skip", token, key("in_sent"), nil))
	require.Equal(t, http.StatusNotFound, send(t, http.MethodPost, srv.URL+"/v1/actions/skip", token, key("in_x"), nil))
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, srv.URL+"/v1/actions/skip", token, map[string]any{"kind": "receipt"}, nil))
	var out struct {
		Skipped int `json:"skipped"`
	}
	require.Equal(t, http.StatusOK, send(t, http.MethodPost, srv.URL+"/v1/actions/skip", token, key("in_dead"), &out))
	require.Equal(t, 1, out.Skipped)
	var sh action.Shown
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, srv.URL+"/v1/actions/stripe/acct_a/test/in_dead/receipt", token, nil, &sh))
	require.Equal(t, action.StatusSkipped, sh.Action.Status)
	require.Equal(t, http.StatusConflict, send(t, http.MethodPost, srv.URL+"/v1/actions/replay", token, key("in_dead"), nil),
		"a skipped action is never replayed")
	var reason string
	require.NoError(t, s.Pool.QueryRow(context.Background(),
		`SELECT target->>'reason' FROM ops_audit WHERE action = 'skip_action' AND actor = 'OPS_TOKEN' AND target->>'subject' = 'in_dead'`).Scan(&reason))
	require.Equal(t, "customer refunded by hand", reason)
}
