package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/pkg/action"
)

// `hookyard actions list|show|replay` work like `dead ...` for external
// actions, and with no receipt URL configured `actions show` and `explain`
// say why a receipt is pending (and stop saying it once RECEIPT_WEBHOOK_URL
// is set). Fails if a command is missing, replays a sent action, or the
// reason is not shown.
func TestActionsCommandsListShowReplayAndSayWhyReceiptsWait(t *testing.T) {
	e := newCLIEnv(t, nil)
	_, err := e.schema.Pool.Exec(t.Context(), `
INSERT INTO fact (provider, source_account, environment, fact_type, fact_id, resource_type, resource_id, event_id, data)
SELECT 'stripe', 'acct_a', 'test', 'invoice_paid', id, 'subscription', 'sub_1', 'evt_' || id, jsonb_build_object('id', id)
FROM unnest(ARRAY['in_dead', 'in_pending', 'in_sent']) id;
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, attempts, last_error, done_at)
VALUES ('stripe', 'acct_a', 'test', 'in_dead', 'receipt', 'evt_in_dead', 'dead', 3, 'attempt 3: HTTP 400', now()),
       ('stripe', 'acct_a', 'test', 'in_pending', 'receipt', 'evt_in_pending', 'pending', 0, NULL, NULL),
       ('stripe', 'acct_a', 'test', 'in_sent', 'receipt', 'evt_in_sent', 'sent', 1, NULL, now())`)
	require.NoError(t, err)

	var l struct {
		Actions []action.Action `json:"actions"`
		Count   int             `json:"count"`
	}
	e.runJSON(&l, "actions", "list")
	require.Equal(t, 1, l.Count)
	require.Equal(t, "in_dead", l.Actions[0].SubjectID)
	e.runJSON(&l, "actions", "list", "-status", "pending", "-kind", "receipt", "-since", "1h")
	require.Equal(t, "in_pending", l.Actions[0].SubjectID)

	var sh action.Shown
	e.runJSON(&sh, "actions", "show", "stripe", "acct_a", "test", "in_pending", "receipt")
	require.Equal(t, effects.ReasonNoURL, sh.Waiting)
	require.Equal(t, "hookyard:stripe:acct_a:test:in_pending:receipt", sh.Action.IdempotencyKey)
	code, out, _ := e.run("explain", "stripe", "acct_a", "test", "subscription", "sub_1")
	require.Equal(t, 0, code)
	require.Contains(t, out, "no receipt_url configured")
	require.Contains(t, out, "hookyard:stripe:acct_a:test:in_sent:receipt")

	code, _, stderr := e.run("actions", "replay", "stripe", "acct_a", "test", "in_sent", "receipt")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "action is not dead (status sent)")
	code, _, stderr = e.run("actions", "replay", "stripe", "acct_a", "test", "in_dead", "receipt", "-kind", "receipt")
	require.Equal(t, 2, code, stderr)
	var rep struct {
		Replayed int `json:"replayed"`
	}
	e.runJSON(&rep, "actions", "replay", "-provider", "stripe")
	require.Equal(t, 1, rep.Replayed)
	e.runJSON(&sh, "actions", "show", "stripe", "acct_a", "test", "in_dead", "receipt")
	require.Equal(t, action.StatusPending, sh.Action.Status)

	t.Setenv("RECEIPT_WEBHOOK_URL", "http://127.0.0.1:1/receipts")
	sh = action.Shown{}
	e.runJSON(&sh, "actions", "show", "stripe", "acct_a", "test", "in_pending", "receipt")
	require.Empty(t, sh.Waiting)
	code, out, _ = e.run("explain", "stripe", "acct_a", "test", "subscription", "sub_1")
	require.Equal(t, 0, code)
	require.NotContains(t, out, "no receipt_url configured")
}

// `hookyard actions skip` gives one dead action up, with a reason kept in
// its last error and in the audit record, and refuses any other status.
// Fails if the command is missing, skips what is not dead, or is not
// audited.
func TestActionsSkipGivesUpADeadActionAudited(t *testing.T) {
	e := newCLIEnv(t, nil)
	_, err := e.schema.Pool.Exec(t.Context(), `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, attempts, last_error, done_at, body, order_key, order_seq)
VALUES ('stripe', 'acct_a', 'test', 'subscription/sub_1@v1', 'change:billing', 'evt_1', 'dead', 3, 'HTTP 400', now(), '{}', 'subscription/sub_1', 1),
       ('stripe', 'acct_a', 'test', 'subscription/sub_1@v2', 'change:billing', 'evt_2', 'pending', 0, NULL, NULL, '{}', 'subscription/sub_1', 2)`)
	require.NoError(t, err)
	code, _, stderr := e.run("actions", "skip", "stripe", "acct_a", "test", "subscription/sub_1@v2", "change:billing")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "action is not dead (status pending)")
	var out struct {
		Skipped int `json:"skipped"`
	}
	e.runJSON(&out, "actions", "skip", "stripe", "acct_a", "test", "subscription/sub_1@v1", "change:billing", "-reason", "v1 rejected for good")
	require.Equal(t, 1, out.Skipped)
	var sh action.Shown
	e.runJSON(&sh, "actions", "show", "stripe", "acct_a", "test", "subscription/sub_1@v1", "change:billing")
	require.Equal(t, action.StatusSkipped, sh.Action.Status)
	require.Contains(t, sh.Action.LastError, "v1 rejected for good")
	var n int
	require.NoError(t, e.schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM ops_audit WHERE action = 'skip_action'
  AND target->>'command' = 'actions skip' AND target->'args' ? '-reason'`).Scan(&n))
	require.Equal(t, 1, n)
}
