package explain_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/explain"
)

// A resource's explanation lists, beside the receipts of its facts, the
// effects its transitions caused (keys "<type>/<id>@v…" and "@f…") and the
// deliveries of its changes to subscribers, each with its status and
// cause, newest first, in the JSON and in the text; another resource's are
// not there. Fails if explain stops reading the caused actions or labels
// them wrong.
func TestExplainListsTransitionEffectsAndSubscriberDeliveries(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	_, err := s.Pool.Exec(t.Context(), `
INSERT INTO fact (provider, source_account, environment, fact_type, fact_id, resource_type, resource_id, event_id, data)
VALUES ('stripe', 'acct_a', 'test', 'invoice_paid', 'in_1', 'subscription', 'sub_1', 'evt_1', '{}');
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, attempts, last_error, done_at, created_at, body, order_key, order_seq)
VALUES ('stripe', 'acct_a', 'test', 'in_1', 'receipt', 'evt_1', 'sent', 1, NULL, now(), now() - interval '4 minutes', NULL, NULL, NULL),
       ('stripe', 'acct_a', 'test', 'subscription/sub_1@v3', 'subscription_canceled', 'evt_3', 'sent', 1, NULL, now(), now() - interval '3 minutes', '{}', NULL, NULL),
       ('stripe', 'acct_a', 'test', 'subscription/sub_1@f9', 'subscription_canceled', 'evt_4', 'failed', 2, 'HTTP 503', NULL, now() - interval '2 minutes', '{}', NULL, NULL),
       ('stripe', 'acct_a', 'test', 'subscription/sub_1@v3', 'change:billing', 'evt_3', 'dead', 5, 'HTTP 400', now(), now() - interval '1 minute', '{}', 'subscription/sub_1', 1),
       ('stripe', 'acct_a', 'test', 'subscription/sub_1@v4', 'change:billing', 'evt_5', 'pending', 0, NULL, NULL, now(), '{}', 'subscription/sub_1', 2),
       ('stripe', 'acct_a', 'test', 'subscription/sub_10@v1', 'change:billing', 'evt_6', 'sent', 1, NULL, now(), now(), '{}', 'subscription/sub_10', 3)`)
	require.NoError(t, err)
	r := message.Resource{Provider: "stripe", SourceAccount: "acct_a", Environment: "test", Type: "subscription", ID: "sub_1"}
	tl, err := explain.Build(t.Context(), s.Pool, r, explain.Options{ActionsWaiting: map[string]string{"change:billing": "subscriber paused"}})
	require.NoError(t, err)
	type row struct{ kind, subject, status, cause, waiting string }
	var got []row
	for _, a := range tl.Actions {
		got = append(got, row{a.Kind, a.SubjectID, a.Status, a.Cause, a.Waiting})
	}
	require.Equal(t, []row{
		{"change:billing", "subscription/sub_1@v4", "pending", explain.CauseChange, "subscriber paused"},
		{"change:billing", "subscription/sub_1@v3", "dead", explain.CauseChange, ""},
		{"subscription_canceled", "subscription/sub_1@f9", "failed", explain.CauseTransition, ""},
		{"subscription_canceled", "subscription/sub_1@v3", "sent", explain.CauseTransition, ""},
		{"receipt", "in_1", "sent", explain.CauseFact, ""},
	}, got)

	var text bytes.Buffer
	require.NoError(t, tl.WriteText(&text))
	out := text.String()
	require.Contains(t, out, "change:billing subscription/sub_1@v3")
	require.Contains(t, out, "caused by change v3")
	require.Contains(t, out, "caused by transition f9")
	require.Contains(t, out, "last error: HTTP 400")
	require.Contains(t, out, "hookyard:stripe:acct_a:test:subscription/sub_1@v4:change%3Abilling")
	require.NotContains(t, out, "sub_10")
}
