package inbox_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

var otherEndpoint = &provider.Endpoint{ID: "cb-test", Provider: provider.Chargebee, SourceAccount: "site_b", Environment: "live"}

func recordOn(ep *provider.Endpoint, id, eventType, sub string) *inbox.Record {
	return &inbox.Record{Endpoint: ep, Event: provider.Event{
		ID: id, Type: eventType, ResourceType: "subscription", ResourceID: sub,
		Payload: []byte(`{"id":"` + id + `"}`),
	}}
}

// kill marks events dead the way the processor leaves them, received at
// receivedAt.
func kill(t *testing.T, pool *pgxpool.Pool, receivedAt time.Time, ids ...string) {
	t.Helper()
	exec(t, pool, `UPDATE webhook_inbox SET status = 'dead', attempts = 8, last_error = 'provider said 500',
    next_attempt_at = NULL, processed_at = now(), received_at = $1 WHERE event_id = ANY($2)`, receivedAt, ids)
}

func ids(rows []inbox.Row) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.EventID)
	}
	return out
}

// seedDead stores six events: four dead (two providers, two types, two
// ages), one processed and one retrying.
func seedDead(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	insert(t, pool,
		recordOn(endpoint, "evt_old", "invoice.paid", "sub_1"),
		recordOn(endpoint, "evt_upd", "customer.subscription.updated", "sub_1"),
		recordOn(endpoint, "evt_upd2", "customer.subscription.updated", "sub_2"),
		recordOn(otherEndpoint, "cb_1", "subscription_changed", "cb_sub"),
		recordOn(endpoint, "evt_ok", "customer.subscription.updated", "sub_1"),
		recordOn(endpoint, "evt_retry", "customer.subscription.updated", "sub_1"),
	)
	exec(t, pool, `DELETE FROM outbox`)
	now := time.Now()
	kill(t, pool, now.Add(-48*time.Hour), "evt_old")
	kill(t, pool, now.Add(-3*time.Hour), "evt_upd")
	kill(t, pool, now.Add(-2*time.Hour), "evt_upd2")
	kill(t, pool, now.Add(-1*time.Hour), "cb_1")
	exec(t, pool, `UPDATE webhook_inbox SET status = 'processed', processed_at = now() WHERE event_id = 'evt_ok'`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'retrying', attempts = 2, next_attempt_at = now() + interval '1 hour' WHERE event_id = 'evt_retry'`)
	return now
}

func TestListDeadFiltersByProviderAccountEnvironmentTypeResourceAndAge(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	now := seedDead(t, pool)
	ctx := t.Context()

	for _, tc := range []struct {
		name string
		f    inbox.DeadFilter
		want []string
	}{
		{"all dead, oldest first", inbox.DeadFilter{}, []string{"evt_old", "evt_upd", "evt_upd2", "cb_1"}},
		{"provider", inbox.DeadFilter{Provider: provider.Chargebee}, []string{"cb_1"}},
		{"account", inbox.DeadFilter{SourceAccount: endpoint.SourceAccount}, []string{"evt_old", "evt_upd", "evt_upd2"}},
		{"environment", inbox.DeadFilter{Environment: "live"}, []string{"cb_1"}},
		{"event type", inbox.DeadFilter{EventType: "customer.subscription.updated"}, []string{"evt_upd", "evt_upd2"}},
		{"resource", inbox.DeadFilter{ResourceType: "subscription", ResourceID: "sub_1"}, []string{"evt_old", "evt_upd"}},
		{"since", inbox.DeadFilter{Since: now.Add(-150 * time.Minute)}, []string{"evt_upd2", "cb_1"}},
		{"limit", inbox.DeadFilter{Limit: 2}, []string{"evt_old", "evt_upd"}},
		{"combined", inbox.DeadFilter{Provider: provider.Stripe, EventType: "customer.subscription.updated", Since: now.Add(-150 * time.Minute)}, []string{"evt_upd2"}},
		{"nothing", inbox.DeadFilter{Provider: "github"}, []string{}},
	} {
		rows, err := inbox.ListDead(ctx, pool, tc.f)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, ids(rows), tc.name)
	}

	rows, err := inbox.ListDead(ctx, pool, inbox.DeadFilter{EventType: "subscription_changed"})
	require.NoError(t, err)
	require.Len(t, rows, 1)
	r := rows[0]
	require.Equal(t, 8, r.Attempts)
	require.Equal(t, "provider said 500", *r.LastError)
	require.Equal(t, "subscription", r.ResourceType)
	require.Equal(t, "cb_sub", r.ResourceID)
	require.Equal(t, "site_b", r.SourceAccount)
	require.WithinDuration(t, now.Add(-time.Hour), r.ReceivedAt, time.Second)
}

func TestReplayDeadMatchingReplaysOnlyTheFilteredDeadEvents(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	seedDead(t, pool)
	ctx := t.Context()

	n, err := inbox.ReplayDeadMatching(ctx, pool, inbox.DeadFilter{Provider: provider.Stripe, EventType: "customer.subscription.updated"})
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	require.Equal(t, inbox.StatusPending, status(t, pool, "evt_upd"))
	require.Equal(t, inbox.StatusPending, status(t, pool, "evt_upd2"))
	require.Equal(t, inbox.StatusDead, status(t, pool, "evt_old"), "another type stays dead")
	require.Equal(t, inbox.StatusRetrying, status(t, pool, "evt_retry"), "a retrying event of the type is not dead")
	require.Equal(t, inbox.StatusProcessed, status(t, pool, "evt_ok"))
	out := outbox(t, pool)
	require.Len(t, out, 2)
	for _, o := range out {
		require.Equal(t, message.ReasonReplay, o.Message["reason"])
		require.Contains(t, []string{"evt_upd", "evt_upd2"}, o.Message["event_id"])
	}

	// The generalised ReplayDead keeps its meaning: every dead event since.
	n, err = inbox.ReplayDead(ctx, pool, time.Now().Add(-90*time.Minute), 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	cb, err := inbox.Get(ctx, pool, inbox.Key{Provider: provider.Chargebee, SourceAccount: "site_b", Environment: "live", EventID: "cb_1"}, false)
	require.NoError(t, err)
	require.Equal(t, inbox.StatusPending, cb.Status)
	require.Equal(t, inbox.StatusDead, status(t, pool, "evt_old"))
}

func TestReplayDeadEventRefusesAnEventThatIsNotDead(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	seedDead(t, pool)
	ctx := t.Context()

	err := inbox.ReplayDeadEvent(ctx, pool, key("evt_ok"))
	require.ErrorIs(t, err, inbox.ErrNotDead)
	require.Contains(t, err.Error(), "status processed")
	require.ErrorIs(t, inbox.ReplayDeadEvent(ctx, pool, key("evt_retry")), inbox.ErrNotDead)
	require.ErrorIs(t, inbox.ReplayDeadEvent(ctx, pool, key("evt_missing")), inbox.ErrNotFound)
	require.Empty(t, outbox(t, pool), "nothing enqueued for events that are not dead")
	require.Equal(t, inbox.StatusProcessed, status(t, pool, "evt_ok"))

	require.NoError(t, inbox.ReplayDeadEvent(ctx, pool, key("evt_upd")))
	require.Equal(t, inbox.StatusPending, status(t, pool, "evt_upd"))
	out := outbox(t, pool)
	require.Len(t, out, 1)
	require.Equal(t, "evt_upd", out[0].Message["event_id"])
	require.Equal(t, "stripe/acct_owner/test/subscription/sub_1", out[0].Key)

	// Replayed once: a second "dead replay" says it is pending now.
	err = inbox.ReplayDeadEvent(ctx, pool, key("evt_upd"))
	require.ErrorIs(t, err, inbox.ErrNotDead)
	require.Contains(t, err.Error(), "status pending")
	require.Len(t, outbox(t, pool), 1)
}

func TestReplayEventsResetsEveryListedEventAndSaysWhyItSkippedOthers(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	seedDead(t, pool)
	ignored := recordOn(endpoint, "evt_ignored", "customer.created", "")
	ignored.Ignored = true
	insert(t, pool, ignored)
	exec(t, pool, `DELETE FROM outbox`)
	ctx := t.Context()

	// A row another transaction holds is skipped as busy, never waited for.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT 1 FROM webhook_inbox WHERE event_id = 'evt_upd2' FOR UPDATE`)
	require.NoError(t, err)

	keys := []inbox.Key{key("evt_ok"), key("evt_old"), key("evt_retry"), key("evt_ignored"), key("evt_gone"), key("evt_upd2")}
	n, skipped, err := inbox.ReplayEvents(ctx, pool, keys)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.Equal(t, map[inbox.Key]string{
		key("evt_ignored"): inbox.SkipIgnored,
		key("evt_gone"):    inbox.SkipNotInInbox,
		key("evt_upd2"):    inbox.SkipBusy,
	}, skipped)
	for _, id := range []string{"evt_ok", "evt_old", "evt_retry"} {
		row, err := inbox.Get(ctx, pool, key(id), false)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusPending, row.Status, id)
		require.Nil(t, row.ProcessedAt, id)
		require.NotNil(t, row.NextAttemptAt, id) // when it was re-published
	}
	require.Equal(t, inbox.StatusIgnored, status(t, pool, "evt_ignored"))
	require.Len(t, outbox(t, pool), 3)

	require.NoError(t, tx.Rollback(ctx))
	n, skipped, err = inbox.ReplayEvents(ctx, pool, []inbox.Key{key("evt_upd2")})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Empty(t, skipped)
}

func TestEnqueueMessagesWritesTheMessagesAsTheyAreOnTheirResourceKeys(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	r := message.Resource{Provider: provider.Stripe, SourceAccount: "acct_owner", Environment: "test", Type: "subscription", ID: "sub_9"}
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	n, err := inbox.EnqueueMessages(t.Context(), pool, []message.Message{
		{Kind: message.KindCheck, Resource: r, Reason: message.ReasonReplay, EnqueuedAt: at},
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	var key string
	var raw []byte
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT message_key, message::text FROM outbox`).Scan(&key, &raw))
	require.Equal(t, r.Key(), key)
	m, err := message.Decode(raw)
	require.NoError(t, err)
	require.Equal(t, message.Message{Kind: message.KindCheck, Resource: r, Reason: message.ReasonReplay, EnqueuedAt: at}, m)
}
