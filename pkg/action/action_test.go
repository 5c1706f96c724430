package action_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/action"
)

// The claim's plan is a walk of action_due, a primary-key update and a
// primary-key read of the fact, on tables without statistics (a fresh
// database, or one restored and not analysed yet). Fails if the claim can
// be planned as a scan or sort of every unsent action, or the fact read as
// a scan of an account's facts.
func TestClaimPlanWalksTheDueIndexWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	plan := func(kind, factType string) string {
		rows, err := s.Pool.Query(ctx, "EXPLAIN "+action.ClaimSQL, kind, 16, int64(40000), 20, "x", factType)
		require.NoError(t, err)
		var lines []string
		for rows.Next() {
			var l string
			require.NoError(t, rows.Scan(&l))
			lines = append(lines, l)
		}
		require.NoError(t, rows.Err())
		return strings.Join(lines, "\n")
	}
	check := func(p string) {
		require.Contains(t, p, "Index Scan using action_due on action", p)
		require.Contains(t, p, "Index Scan using action_pkey on action a", p)
		require.Contains(t, p, "Index Scan using fact_pkey on fact f", p)
		require.NotContains(t, p, "Seq Scan", p)
		require.NotContains(t, p, "Sort", p)
	}
	// A transition's effect joins no fact: its claim reads the fact table
	// not at all, or by primary key behind a filter that is false.
	checkTransition := func(p string) {
		require.Contains(t, p, "Index Scan using action_due on action", p)
		require.NotContains(t, p, "Seq Scan", p)
		require.NotContains(t, p, "Sort", p)
	}
	check(plan(action.KindReceipt, "invoice_paid"))
	checkTransition(plan("subscription_canceled", ""))
	_, err := s.Pool.Exec(ctx, `ALTER TABLE fact SET (autovacuum_enabled = false);
ALTER TABLE action SET (autovacuum_enabled = false);
INSERT INTO fact (provider, source_account, environment, fact_type, fact_id, resource_type, resource_id, event_id, data)
SELECT 'stripe', 'acct', 'test', 'invoice_paid', 'in_' || i, 'subscription', 'sub_' || (i % 10), 'evt_' || i, '{}'
FROM generate_series(1, 5000) i;
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status)
SELECT 'stripe', 'acct', 'test', 'in_' || i, 'receipt', 'evt_' || i,
       CASE WHEN i % 100 = 0 THEN 'pending' WHEN i % 7 = 0 THEN 'dead' ELSE 'sent' END
FROM generate_series(1, 5000) i`)
	require.NoError(t, err)
	check(plan(action.KindReceipt, "invoice_paid"))
	checkTransition(plan("subscription_canceled", ""))
}

// The stable key is the action's identity written out, so two identities
// never share one: ":" and "%" inside a part are percent-encoded. Fails if
// a colon in an id could make two actions send the same Idempotency-Key.
func TestStableKeysOfDistinctActionsDiffer(t *testing.T) {
	t.Parallel()
	a := action.Key{Provider: "standard-webhooks", SourceAccount: "acct:1", Environment: "test", SubjectID: "inv", Kind: "receipt"}
	b := action.Key{Provider: "standard-webhooks", SourceAccount: "acct", Environment: "1:test", SubjectID: "inv", Kind: "receipt"}
	c := action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: "in_%3A", Kind: "receipt"}
	d := action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: "in_:", Kind: "receipt"}
	require.Equal(t, "hookyard:standard-webhooks:acct%3A1:test:inv:receipt", a.String())
	require.NotEqual(t, a.String(), b.String())
	require.NotEqual(t, c.String(), d.String())
	require.Equal(t, "hookyard:stripe:acct_1:test:in_1:receipt", paidKey("in_1").String())
}

func paidKey(invoice string) action.Key {
	return action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: invoice, Kind: action.KindReceipt}
}
