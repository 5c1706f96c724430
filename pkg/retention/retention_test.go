package retention_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/partition"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/retention"
)

var endpoint = &provider.Endpoint{ID: "stripe-test", Provider: provider.Stripe, SourceAccount: "acct_owner", Environment: "test"}

func record(id, sub string) *inbox.Record {
	return &inbox.Record{Endpoint: endpoint, Event: provider.Event{
		ID: id, Type: "customer.subscription.updated", ResourceType: "subscription", ResourceID: sub,
		Payload: []byte(`{"id":"` + id + `"}`),
	}}
}

func key(id string) inbox.Key {
	return inbox.Key{Provider: endpoint.Provider, SourceAccount: endpoint.SourceAccount, Environment: endpoint.Environment, EventID: id}
}

func exec(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	_, err := pool.Exec(t.Context(), sql, args...)
	require.NoError(t, err)
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), sql, args...).Scan(&n))
	return n
}

func payload(t *testing.T, pool *pgxpool.Pool, id string) []byte {
	t.Helper()
	l, err := inbox.Load(t.Context(), pool, []inbox.Key{key(id)})
	require.NoError(t, err)
	require.Contains(t, l, key(id))
	return l[key(id)].Payload
}

// Retention of bodies is a DROP of whole partitions (no UPDATE, no dead
// tuple), minute-wide partitions included; before a drop, the bodies that
// unfinished events still need move to the current partition: pending ones
// always, dead and retrying ones while younger than dead_payload_age. Older
// dead and retrying events lose their body and say "purged"; finished ones
// too. Identities stay. Fails without the move (pending events lose their
// body) or without the expiry (old dead bodies live for ever).
func TestBodiesGoByWholePartitionsAndUnfinishedEventsKeepTheirs(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	_, err := inbox.Insert(t.Context(), pool, []*inbox.Record{record("evt_done", "sub_1"), record("evt_pending", "sub_1"),
		record("evt_dead_young", "sub_1"), record("evt_dead_old", "sub_1"), record("evt_retrying_old", "sub_1")}, time.Now())
	require.NoError(t, err)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'processed' WHERE event_id = 'evt_done'`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'dead', last_error = 'boom' WHERE event_id LIKE 'evt_dead%'`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'retrying', last_error = 'still failing', next_attempt_at = now() WHERE event_id = 'evt_retrying_old'`)
	exec(t, pool, `UPDATE webhook_inbox SET received_at = now() - interval '20 days' WHERE event_id IN ('evt_dead_old', 'evt_retrying_old')`)

	// Four days on, with minute-wide partitions: the migration's first
	// partition (three days) is behind a one-hour horizon.
	now := time.Now().Add(4 * 24 * time.Hour)
	p := retention.Policy{PayloadAge: time.Hour, PartitionInterval: time.Minute, DeadPayloadAge: 14 * 24 * time.Hour}
	rep, err := retention.Run(t.Context(), pool, nil, p, now)
	require.NoError(t, err)
	var created, dropped int
	for _, c := range rep.Partitions {
		if c.Table != inbox.BodyTableName {
			continue
		}
		if c.Dropped {
			dropped++
			require.Equal(t, partition.Name(inbox.BodyTableName, c.From, c.To), c.Partition, "names carry their bounds")
		} else {
			created++
			require.Equal(t, time.Minute, c.To.Sub(c.From))
		}
	}
	require.Equal(t, 1, dropped, "the old partition went whole")
	require.GreaterOrEqual(t, created, 60, "an hour of minute partitions ahead")

	require.Equal(t, []byte(`{"id":"evt_pending"}`), payload(t, pool, "evt_pending"), "a pending event keeps its body")
	require.Equal(t, []byte(`{"id":"evt_dead_young"}`), payload(t, pool, "evt_dead_young"), "a young dead event keeps its body")
	for _, id := range []string{"evt_done", "evt_dead_old", "evt_retrying_old"} {
		require.Nil(t, payload(t, pool, id), "%s lost its body", id)
		_, err := inbox.Replay(t.Context(), pool, key(id))
		require.ErrorIs(t, err, inbox.ErrPurged, "%s reads as purged", id)
	}
	row, err := inbox.Get(t.Context(), pool, key("evt_retrying_old"), false)
	require.NoError(t, err)
	require.Equal(t, inbox.StatusDead, row.Status, "nothing left to retry with")
	require.Equal(t, inbox.OutcomePurged, *row.Outcome)
	require.Equal(t, "still failing", *row.LastError, "the reason stays")
	require.Equal(t, 5, count(t, pool, `SELECT count(*) FROM webhook_inbox`), "identities stay")
	require.Equal(t, 0, count(t, pool, `SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'webhook_inbox_body'::regclass`))

	// Intake goes on (the database's clock is today's: its partition was
	// dropped with the old one, so it is created again first).
	_, err = retention.Ensure(t.Context(), pool, nil, p, time.Now())
	require.NoError(t, err)
	res, err := inbox.Insert(t.Context(), pool, []*inbox.Record{record("evt_done", "sub_1"), record("evt_new", "sub_1")}, time.Now())
	require.NoError(t, err)
	require.Equal(t, []inbox.Result{inbox.Duplicate, inbox.Accepted}, res, "the ledger still knows a purged event")
}

// Several instances run the pass at once (every reconciler, every service
// at start): each partition is created once and dropped once, and none of
// them fails. Fails without the advisory lock (duplicate or overlapping
// partitions).
func TestConcurrentRetentionPassesCreateAndDropEachPartitionOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.NewWithConns(t, 16).Pool
	now := time.Now().Add(4 * 24 * time.Hour)
	p := retention.Policy{PayloadAge: time.Hour, PartitionInterval: time.Minute, DeadPayloadAge: 24 * time.Hour}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]int{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, err := retention.Run(t.Context(), pool, nil, p, now)
			require.NoError(t, err)
			mu.Lock()
			defer mu.Unlock()
			for _, c := range rep.Partitions {
				if c.Table == inbox.BodyTableName {
					seen[c.Partition]++
				}
			}
		}()
	}
	wg.Wait()
	for name, n := range seen {
		require.Equal(t, 1, n, "%s changed by one pass only", name)
	}
	parts, err := partition.List(t.Context(), pool, inbox.BodyTableName)
	require.NoError(t, err)
	require.Equal(t, len(seen)-1, len(parts), "every created partition is there, the dropped one is not")
}

// An erasure removes the bodies of one account's events (or of the named
// resources only) and keeps their identities: a redelivery is still a
// duplicate, and the events read as purged.
func TestEraseAccountRemovesBodiesAndKeepsIdentities(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	other := &provider.Endpoint{ID: "other", Provider: provider.Stripe, SourceAccount: "acct_other", Environment: "test"}
	r := record("evt_other", "sub_1")
	r.Endpoint = other
	_, err := inbox.Insert(t.Context(), pool, []*inbox.Record{record("evt_1", "sub_1"), record("evt_2", "sub_2"), record("evt_3", "sub_2"), r}, time.Now())
	require.NoError(t, err)
	// A row from before bodies moved to partitions keeps it in the ledger.
	exec(t, pool, `UPDATE webhook_inbox SET payload = '{"id":"evt_3"}', raw_body = '\x00', body_at = NULL WHERE event_id = 'evt_3'`)
	exec(t, pool, `DELETE FROM webhook_inbox_body WHERE event_id = 'evt_3'`)

	erase := func(ids []string) int64 {
		var n int64
		require.NoError(t, pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
			var err error
			n, err = inbox.EraseAccount(t.Context(), tx, endpoint.Provider, endpoint.SourceAccount, endpoint.Environment, ids)
			return err
		}))
		return n
	}
	require.EqualValues(t, 2, erase([]string{"sub_2"}), "only the named resource's events")
	require.NotNil(t, payload(t, pool, "evt_1"))
	require.Nil(t, payload(t, pool, "evt_2"))
	require.Nil(t, payload(t, pool, "evt_3"), "legacy columns emptied too")
	require.EqualValues(t, 1, erase(nil), "then the whole account")
	require.Nil(t, payload(t, pool, "evt_1"))
	l, err := inbox.Load(context.WithoutCancel(t.Context()), pool, []inbox.Key{{Provider: provider.Stripe, SourceAccount: "acct_other", Environment: "test", EventID: "evt_other"}})
	require.NoError(t, err)
	require.Len(t, l, 1)
	for _, v := range l {
		require.NotNil(t, v.Payload, "another account is untouched")
	}
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox_body`))
	require.Equal(t, 4, count(t, pool, `SELECT count(*) FROM webhook_inbox`), "identities stay")
	res, err := inbox.Insert(t.Context(), pool, []*inbox.Record{record("evt_1", "sub_1")}, time.Now())
	require.NoError(t, err)
	require.Equal(t, []inbox.Result{inbox.Duplicate}, res)
}

// Identities are forgotten past identity_age, finished and dead ones only,
// bodies with them, and the ledger is vacuumed. Fails if a pending or
// retrying identity, or a young one, is forgotten.
func TestForgetIdentitiesKeepsUnfinishedAndYoungOnes(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	_, err := inbox.Insert(t.Context(), pool, []*inbox.Record{record("evt_old_processed", "s"), record("evt_old_pending", "s"),
		record("evt_old_retrying", "s"), record("evt_old_dead", "s"), record("evt_young_processed", "s")}, time.Now())
	require.NoError(t, err)
	exec(t, pool, `UPDATE webhook_inbox SET status = split_part(event_id, '_', 3)`)
	exec(t, pool, `UPDATE webhook_inbox SET received_at = now() - interval '40 days' WHERE event_id LIKE 'evt_old%'`)
	n, err := inbox.ForgetIdentities(t.Context(), pool, time.Now().Add(-35*24*time.Hour), time.Now().Add(-35*24*time.Hour), 1)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	var left []string
	rows, err := pool.Query(t.Context(), `SELECT event_id FROM webhook_inbox ORDER BY event_id`)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"evt_old_pending", "evt_old_retrying", "evt_young_processed"}, left)
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM webhook_inbox_body`), "bodies went with their identities")
}

// projection_history and ops_audit are partitioned too (migration 00022):
// their rows from before the partitions live in the attached legacy
// partition, new partitions are created ahead, and everything goes by
// whole partitions past retention.history_age and retention.audit_age.
func TestHistoryAndAuditGoByWholePartitions(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	exec(t, pool, `INSERT INTO projection_history (provider, source_account, environment, resource_type, resource_id, outcome)
VALUES ('stripe', 'a', 'test', 'subscription', 'sub_1', 'applied')`)
	exec(t, pool, `INSERT INTO ops_audit (actor, action) VALUES ('cli:me', 'purge')`)

	p := retention.Policy{PartitionInterval: 24 * time.Hour, HistoryAge: 90 * 24 * time.Hour, AuditAge: 400 * 24 * time.Hour}
	rep, err := retention.Run(t.Context(), pool, nil, p, time.Now())
	require.NoError(t, err)
	for _, c := range rep.Partitions {
		require.False(t, c.Dropped, "nothing is old enough yet: %+v", c)
	}
	hist, err := partition.List(t.Context(), pool, "projection_history")
	require.NoError(t, err)
	require.Equal(t, "projection_history_legacy", hist[0].Name, "rows from before stay in the legacy partition")
	require.Nil(t, hist[0].From)
	require.Greater(t, len(hist), 1, "partitions ahead")
	require.Equal(t, *hist[0].To, *hist[1].From, "the first new partition starts where the legacy one ends")
	// Ids still come from the table's sequence, in the new partitions too.
	exec(t, pool, `INSERT INTO projection_history (provider, source_account, environment, resource_type, resource_id, outcome, recorded_at)
VALUES ('stripe', 'a', 'test', 'subscription', 'sub_1', 'applied', $1)`, *hist[1].From)
	require.Equal(t, 2, count(t, pool, `SELECT count(DISTINCT id) FROM projection_history`))

	// Past both horizons, the partitions holding those rows are gone whole.
	rep, err = retention.Run(t.Context(), pool, nil, p, time.Now().Add(410*24*time.Hour))
	require.NoError(t, err)
	dropped := map[string]bool{}
	for _, c := range rep.Partitions {
		if c.Dropped {
			dropped[c.Partition] = true
		}
	}
	require.True(t, dropped["projection_history_legacy"])
	require.True(t, dropped["ops_audit_legacy"])
	require.Zero(t, count(t, pool, `SELECT count(*) FROM projection_history`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM ops_audit`))
	exec(t, pool, `SELECT nextval('projection_history_id_seq')`) // the sequence outlived the legacy table
}

// The pass deletes the subscribers' deliveries settled before
// retention.delivery_age and reports them; a young one, an unsettled one
// and a receipt stay, and with no delivery_age nothing goes. Fails if Run
// does not call the deliveries' retention or reports it wrong.
func TestPassForgetsDeliveriesSettledBeforeDeliveryAge(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	exec(t, pool, `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, done_at, body, order_key, order_seq)
VALUES ('stripe', 'a', 'test', 'subscription/sub_1@v1', 'change:billing', 'e', 'sent', now() - interval '40 days', '{}', 'subscription/sub_1', 1),
       ('stripe', 'a', 'test', 'subscription/sub_2@v1', 'change:billing', 'e', 'skipped', now() - interval '40 days', '{}', 'subscription/sub_2', 2),
       ('stripe', 'a', 'test', 'subscription/sub_3@v1', 'change:billing', 'e', 'sent', now() - interval '2 days', '{}', 'subscription/sub_3', 3),
       ('stripe', 'a', 'test', 'subscription/sub_4@v1', 'change:billing', 'e', 'dead', now() - interval '40 days', '{}', 'subscription/sub_4', 4),
       ('stripe', 'a', 'test', 'in_1', 'receipt', 'e', 'sent', now() - interval '40 days', NULL, NULL, NULL)`)
	p := retention.Policy{PartitionInterval: 24 * time.Hour}
	rep, err := retention.Run(t.Context(), pool, nil, p, time.Now())
	require.NoError(t, err)
	require.Zero(t, rep.DeliveriesForgotten)
	require.Equal(t, 5, count(t, pool, `SELECT count(*) FROM action`), "no delivery_age: kept")
	p.DeliveryAge = 30 * 24 * time.Hour
	rep, err = retention.Run(t.Context(), pool, nil, p, time.Now())
	require.NoError(t, err)
	require.EqualValues(t, 2, rep.DeliveriesForgotten)
	rows, err := pool.Query(t.Context(), `SELECT subject_id FROM action ORDER BY subject_id`)
	require.NoError(t, err)
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"in_1", "subscription/sub_3@v1", "subscription/sub_4@v1"}, left)
}

// The ledger takes new identities all the time: a vacuum after forgetting
// identities must not truncate its empty tail pages, which takes an ACCESS
// EXCLUSIVE lock that intake and the processor's marks wait behind (a
// vacuum tries for up to 5 s to get it). Whether a given vacuum here would
// truncate depends on the snapshots of the tests beside it, so the test
// reads what decides it: the table's setting (autovacuum, migration 00047)
// and retention's own VACUUM. Fails without either.
func TestVacuumsOfTheLedgerLeaveItsPages(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	var opts []string
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'webhook_inbox'::regclass`).Scan(&opts))
	require.Contains(t, opts, "vacuum_truncate=false")

	pool, trace := s.Traced(t)
	_, err := inbox.Insert(ctx, pool, []*inbox.Record{record("evt_1", "s")}, time.Now())
	require.NoError(t, err)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'processed', received_at = now() - interval '40 days'`)
	n, err := inbox.ForgetIdentities(ctx, pool, time.Now().Add(-35*24*time.Hour), time.Now().Add(-35*24*time.Hour), 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	var vacuums []string
	for _, q := range trace.SQL() {
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(q)), "VACUUM") {
			vacuums = append(vacuums, q)
		}
	}
	require.Equal(t, []string{"VACUUM (TRUNCATE false) webhook_inbox"}, vacuums)
}
