package inbox_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/schemas"
)

// intake20SQL is intake as receivers of the previous version run it
// (migration 00020's layout: the body in the ledger row, jsonb), reduced to
// what the migration test needs: ledger row and outbox row in one
// statement, repeats creating nothing.
const intake20SQL = `
WITH ins AS (
    INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type,
                               resource_type, resource_id, payload, status)
    VALUES ('stripe', 'acct_owner', 'test', $1, 'stripe-test', 'customer.subscription.updated', 'subscription', $2, $3::jsonb, 'pending')
    ON CONFLICT DO NOTHING
    RETURNING event_id
)
INSERT INTO outbox (message_key, message)
SELECT 'stripe/acct_owner/test/subscription/' || $2, jsonb_build_object('kind', 'event', 'event_id', event_id) FROM ins
RETURNING 1`

// Migration 00021 runs on an inbox of 1,000,000 rows (100,000 with
// -short) while receivers keep taking webhooks: receivers of the previous
// version during the migration, of this version after it. Writers run with
// lock_timeout 5s, so a migration that held a lock on webhook_inbox for
// long fails them. Afterwards every accepted event is there exactly once,
// with one outbox row (one processing), and its body is readable, whichever
// layout stored it; repeats created nothing. The longest intake statement
// during the migration is logged.
func TestOnlineMigrationOf1MInboxRowsKeepsTakingWebhooks(t *testing.T) {
	t.Parallel()
	rows := 1_000_000
	if testing.Short() {
		rows = 100_000
	}
	dbtest.New(t) // the test database exists
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, dbtest.URL())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = admin.Close(context.Background())
	})
	pool, err := db.Open(ctx, dbtest.URL(), db.Options{MaxConns: 12, SearchPath: schema})
	require.NoError(t, err)
	defer pool.Close()

	sub, err := fs.Sub(schemas.Migrations, "migrations")
	require.NoError(t, err)
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	mig, err := goose.NewProvider(goose.DialectPostgres, sqlDB, sub)
	require.NoError(t, err)
	_, err = mig.UpTo(ctx, 20)
	require.NoError(t, err)

	began := time.Now()
	_, err = pool.Exec(ctx, `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type,
    resource_type, resource_id, payload, status, outcome, processed_at, received_at)
SELECT 'stripe', 'acct_owner', 'test', 'evt_old_' || g, 'stripe-test', 'customer.subscription.updated',
       'subscription', 'sub_' || (g % 100000),
       jsonb_build_object('id', 'evt_old_' || g, 'type', 'customer.subscription.updated',
           'data', jsonb_build_object('object', jsonb_build_object('id', 'sub_' || (g % 100000), 'status', 'active',
               'customer', 'cus_' || g, 'current_period_end', 1700000000 + g))),
       'processed', 'applied', now(), now() - (g * interval '1 second')
FROM generate_series(1, $1::int) g`, rows)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE webhook_inbox`)
	require.NoError(t, err)
	t.Logf("loaded %d inbox rows at migration 00020's layout in %s", rows, time.Since(began).Round(time.Millisecond))

	var (
		migrating atomic.Bool
		migrated  atomic.Bool
		mu        sync.Mutex
		accepted  = map[string]bool{}
		longest   time.Duration
		writes    atomic.Int64
	)
	migrating.Store(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	ep := &provider.Endpoint{ID: "stripe-test", Provider: provider.Stripe, SourceAccount: "acct_owner", Environment: "test"}
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pool.Acquire(ctx)
			if !assertNoErr(t, err) {
				return
			}
			defer conn.Release()
			_, err = conn.Exec(ctx, `SET lock_timeout = '5s'`)
			if !assertNoErr(t, err) {
				return
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("evt_live_%d_%d", w, i)
				if i%10 == 9 {
					id = fmt.Sprintf("evt_live_%d_%d", w, i-1) // a redelivery
				}
				body := fmt.Sprintf(`{"id":%q,"type":"customer.subscription.updated"}`, id)
				start := time.Now()
				var isNew bool
				if !migrated.Load() {
					tag, err := conn.Exec(ctx, intake20SQL, id, "sub_live", body)
					if !assertNoErr(t, err) {
						return
					}
					isNew = tag.RowsAffected() == 1
				} else {
					r := &inbox.Record{Endpoint: ep, Event: provider.Event{ID: id, Type: "customer.subscription.updated",
						ResourceType: "subscription", ResourceID: "sub_live", Payload: []byte(body)}}
					res, err := inbox.Insert(ctx, pool, []*inbox.Record{r}, time.Now())
					if !assertNoErr(t, err) {
						return
					}
					isNew = res[0] == inbox.Accepted
				}
				took := time.Since(start)
				writes.Add(1)
				mu.Lock()
				if migrating.Load() && took > longest {
					longest = took
				}
				if isNew {
					if accepted[id] {
						t.Errorf("%s accepted twice", id)
					}
					accepted[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond) // writers under way
	before := writes.Load()
	began = time.Now()
	_, err = mig.Up(ctx)
	took := time.Since(began)
	migrating.Store(false)
	require.NoError(t, err)
	during := writes.Load() - before
	// This version's code creates its partitions at start (openDB), then
	// takes over from the previous version's receivers.
	migrated.Store(true)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("migration 00021 took %s on %d rows; %d intake statements ran meanwhile, the longest took %s",
		took.Round(time.Millisecond), rows, during, longest.Round(time.Millisecond))
	require.Positive(t, during, "webhooks were taken while the migration ran")

	ids := make([]string, 0, len(accepted))
	keys := make([]inbox.Key, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
		keys = append(keys, inbox.Key{Provider: "stripe", SourceAccount: "acct_owner", Environment: "test", EventID: id})
	}
	var inLedger, outboxRows, outboxEvents int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE event_id LIKE 'evt_live_%'`).Scan(&inLedger))
	require.Equal(t, len(ids), inLedger, "every accepted event is in the ledger, once; nothing else is")
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT message::jsonb->>'event_id') FROM outbox
WHERE message::jsonb->>'event_id' = ANY($1)`, ids).Scan(&outboxRows, &outboxEvents))
	require.Equal(t, len(ids), outboxEvents, "every accepted event has work")
	require.Equal(t, len(ids), outboxRows, "one outbox row per accepted event: processed once")
	loaded, err := inbox.Load(ctx, pool, keys)
	require.NoError(t, err)
	require.Len(t, loaded, len(keys))
	for k, l := range loaded {
		require.Contains(t, string(l.Payload), k.EventID, "the body of %s is readable", k.EventID)
	}
	old, err := inbox.Load(ctx, pool, []inbox.Key{{Provider: "stripe", SourceAccount: "acct_owner", Environment: "test", EventID: "evt_old_1"}})
	require.NoError(t, err)
	require.Contains(t, string(old[inbox.Key{Provider: "stripe", SourceAccount: "acct_owner", Environment: "test", EventID: "evt_old_1"}].Payload), "evt_old_1",
		"a row from before the migration keeps its body")
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}
