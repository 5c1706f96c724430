package action_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/action"
)

// The retention of deliveries deletes the subscribers' deliveries sent or
// skipped before the horizon, bodies with them, and nothing else: not an
// unsettled delivery (whatever its age), not a receipt, not a delivery
// settled after the horizon, and not a settled delivery while a later
// delivery of its resource is unsettled. The last one is the ordering
// guard: a re-read of the changes topic then finds the old change's action
// and records nothing, where a deleted one would be recorded anew behind
// the later change and sent after it. Fails if the status, kind, horizon or
// later-unsettled guard of forgetDeliveriesSQL is removed.
func TestDeliveryRetentionDeletesOnlySettledDeliveriesNoLaterOneNeeds(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	// sub_done: v1, v2 sent 40 days ago, v3 skipped 40 days ago → all go.
	// sub_dead: v1 sent 40 days ago, v2 dead → v1 stays (v2 still blocks
	// its resource and goes out after a replay; v1 re-read must not
	// follow it).
	// sub_pending: v1 sent 40 days ago, v2 pending → v1 stays.
	// sub_young: v1 sent 40 days ago, v2 sent 1 day ago → v1 goes, v2 stays.
	// sub_open: v1 failed, v2 ambiguous, v3 sending, v4 pending: all old,
	// none settled → all stay.
	// receipts: a receipt sent 40 days ago stays (not a delivery).
	_, err := s.Pool.Exec(ctx, `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, done_at, created_at, body, order_key, order_seq)
SELECT 'stripe', 'acct_1', 'test', r || '@v' || v, 'change:billing', 'evt', st,
       CASE WHEN st IN ('sent', 'skipped', 'dead') THEN now() - d * interval '1 day' END,
       now() - interval '41 days', '{"id":"' || r || '"}', r, nextval('action_order_seq')
FROM (VALUES
    ('subscription/sub_done', 1, 'sent', 40), ('subscription/sub_done', 2, 'sent', 40), ('subscription/sub_done', 3, 'skipped', 40),
    ('subscription/sub_dead', 1, 'sent', 40), ('subscription/sub_dead', 2, 'dead', 40),
    ('subscription/sub_pending', 1, 'sent', 40), ('subscription/sub_pending', 2, 'pending', 0),
    ('subscription/sub_young', 1, 'sent', 40), ('subscription/sub_young', 2, 'sent', 1),
    ('subscription/sub_open', 1, 'failed', 0), ('subscription/sub_open', 2, 'ambiguous', 0),
    ('subscription/sub_open', 3, 'sending', 0), ('subscription/sub_open', 4, 'pending', 0)
) x(r, v, st, d) ORDER BY r, v;
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, done_at, created_at)
VALUES ('stripe', 'acct_1', 'test', 'in_1', 'receipt', 'evt', 'sent', now() - interval '40 days', now() - interval '41 days')`)
	require.NoError(t, err)

	n, err := action.ForgetDeliveries(ctx, s.Pool, time.Now().Add(-30*24*time.Hour), 2)
	require.NoError(t, err)
	require.EqualValues(t, 4, n, "sub_done's three and sub_young's v1, in batches of 2")

	rows, err := s.Pool.Query(ctx, `SELECT subject_id FROM action ORDER BY subject_id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"in_1",
		"subscription/sub_dead@v1", "subscription/sub_dead@v2",
		"subscription/sub_open@v1", "subscription/sub_open@v2", "subscription/sub_open@v3", "subscription/sub_open@v4",
		"subscription/sub_pending@v1", "subscription/sub_pending@v2",
		"subscription/sub_young@v2"}, left)

	// The feeder reads sub_dead's v1 again: its action is there, so
	// nothing is recorded behind the dead v2; once v2 is replayed and
	// sent, v1 is not sent after it.
	b := &pgx.Batch{}
	k := action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: "subscription/sub_dead@v1", Kind: "change:billing"}
	action.QueueOrderedRecord(b, action.OrderedRecord{Record: action.Record{Key: k, EventID: "evt", Body: []byte(`{}`)}, OrderKey: "subscription/sub_dead"})
	require.NoError(t, s.Pool.SendBatch(ctx, b).Close())
	require.NoError(t, action.ReplayDead(ctx, s.Pool, action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test",
		SubjectID: "subscription/sub_dead@v2", Kind: "change:billing"}))
	_, err = s.Pool.Exec(ctx, `UPDATE action SET status = 'sent', done_at = now() WHERE order_key <> 'subscription/sub_dead'`)
	require.NoError(t, err)
	l := action.Lease{For: time.Minute, MaxAttempts: 5, SenderID: "s"}
	cs, err := action.ClaimOrdered(ctx, s.Pool, "change:billing", 10, l)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, "subscription/sub_dead@v2", cs[0].Key.SubjectID)
	_, err = action.Settle(ctx, s.Pool, cs[0], action.Outcome{Status: action.StatusSent}, l.MaxAttempts)
	require.NoError(t, err)
	cs, err = action.ClaimOrdered(ctx, s.Pool, "change:billing", 10, l)
	require.NoError(t, err)
	require.Empty(t, cs, "the older change is not sent after the newer one")
}

// BenchmarkForgetDeliveries runs one statement of the deliveries'
// retention (a batch of 1,000) on a table of 300,000 deliveries (3,000
// resources, one in ten with a pending change at its head, whose old
// history the pass keeps and walks past), without statistics, the batches
// before it deleted and not yet vacuumed. Reports ms per batch.
func BenchmarkForgetDeliveries(b *testing.B) {
	s := dbtest.New(b)
	ctx := context.Background()
	load := func() {
		_, err := s.Pool.Exec(ctx, `TRUNCATE action;
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, done_at, body, order_key, order_seq)
SELECT 'stripe', 'acct', 'test', 'subscription/sub_' || (i % 3000) || '@v' || i, 'change:billing', 'evt_' || i,
       CASE WHEN i > 297000 AND i % 10 = 0 THEN 'pending' ELSE 'sent' END,
       CASE WHEN i > 297000 AND i % 10 = 0 THEN NULL ELSE now() - interval '60 days' + i * interval '10 seconds' END,
       '{"id":"x"}', 'subscription/sub_' || (i % 3000), nextval('action_order_seq')
FROM generate_series(1, 300000) i`)
		require.NoError(b, err)
	}
	_, err := s.Pool.Exec(ctx, `ALTER TABLE action SET (autovacuum_enabled = false)`)
	require.NoError(b, err)
	load()
	before := time.Now().Add(-30 * 24 * time.Hour)
	deleted := int64(0)
	for b.Loop() {
		tag, err := s.Pool.Exec(ctx, action.ForgetDeliveriesSQL, before, 1000)
		require.NoError(b, err)
		if tag.RowsAffected() < 1000 {
			b.StopTimer()
			load()
			b.StartTimer()
		}
		deleted += tag.RowsAffected()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/batch")
	b.ReportMetric(float64(deleted)/float64(b.N), "deleted/batch")
}
