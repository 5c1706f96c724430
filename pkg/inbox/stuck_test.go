package inbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// An event counts as published only when its publication's outbox row is
// gone: one still waiting in the outbox (or behind an older backlog) is
// slow, not lost, and one the broker refused for good (outbox_dead) is the
// operator's. Fails if pending age alone makes an event a candidate again.
func TestOnlyEventsWhoseOutboxRowLeftArePublishedPending(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	insert(t, pool, record("evt_published", "sub_1"))
	insert(t, pool, record("evt_waiting", "sub_2"))
	// Published two hours ago: its outbox row is gone.
	exec(t, pool, `UPDATE webhook_inbox SET received_at = now() - interval '2 hours' WHERE event_id = 'evt_published'`)
	exec(t, pool, `DELETE FROM outbox WHERE message::jsonb->>'event_id' = 'evt_published'`)
	// Received an hour ago, its outbox row still waits for the relay.
	// Intake stamps both rows with one now(); so does this.
	hourAgo := time.Now().Add(-time.Hour)
	exec(t, pool, `UPDATE webhook_inbox SET received_at = $1 WHERE event_id = 'evt_waiting'`, hourAgo)
	exec(t, pool, `UPDATE outbox SET created_at = $1`, hourAgo)

	cutoff := time.Now().Add(-10 * time.Minute)
	pub, err := inbox.PublishedPending(t.Context(), pool, cutoff, 100)
	require.NoError(t, err)
	require.Len(t, pub, 1)
	require.Equal(t, key("evt_published"), pub[0].Key)
	require.Equal(t, "stripe/acct_owner/test/subscription/sub_1", pub[0].MessageKey, "the key intake published it with")

	// A backlog older than the event: the relay is behind, nothing is lost yet.
	exec(t, pool, `UPDATE outbox SET created_at = now() - interval '3 hours'`)
	pub, err = inbox.PublishedPending(t.Context(), pool, cutoff, 100)
	require.NoError(t, err)
	require.Empty(t, pub)

	// The broker refused it for good: publishing again would fail again.
	exec(t, pool, `DELETE FROM outbox`)
	exec(t, pool, `INSERT INTO outbox_dead (id, message_key, message, created_at, error)
SELECT 1, 'stripe/acct_owner/test/subscription/sub_1', '{}', received_at, 'MESSAGE_TOO_LARGE' FROM webhook_inbox WHERE event_id = 'evt_published'`)
	pub, err = inbox.PublishedPending(t.Context(), pool, cutoff, 100)
	require.NoError(t, err)
	require.Len(t, pub, 1)
	require.Equal(t, key("evt_waiting"), pub[0].Key)
}

// RequeueLost publishes an event again only while it is pending from the
// publication that was judged lost: one processed or re-published since is
// left alone. Fails if the publication time is not compared.
func TestRequeueLostLeavesEventsPublishedAgainSince(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	insert(t, pool, record("evt_lost", "sub_1"), record("evt_replayed", "sub_2"), record("evt_done", "sub_3"))
	exec(t, pool, `DELETE FROM outbox`)
	exec(t, pool, `UPDATE webhook_inbox SET received_at = now() - interval '1 hour'`)
	pub, err := inbox.PublishedPending(t.Context(), pool, time.Now().Add(-time.Minute), 100)
	require.NoError(t, err)
	require.Len(t, pub, 3)

	n, err := inbox.Replay(t.Context(), pool, key("evt_replayed"))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'processed' WHERE event_id = 'evt_done'`)
	exec(t, pool, `DELETE FROM outbox`)

	n, err = inbox.RequeueLost(t.Context(), pool, pub)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	rows := outbox(t, pool)
	require.Len(t, rows, 1)
	require.Equal(t, "evt_lost", rows[0].Message["event_id"])
	require.Equal(t, "requeue", rows[0].Message["reason"])
}

// After a stop with a large backlog, `hookyard dev` re-publishes pending
// events page by page, each page its own statement, so the relay starts on
// the first page and no statement holds the whole backlog. Fails if it goes
// back to one statement for everything, or misses events.
func TestRepublishPendingPagesInBatches(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	var recs []*inbox.Record
	for i := range 25 {
		recs = append(recs, record("evt_"+string(rune('a'+i)), "sub_1"))
	}
	insert(t, pool, recs...)
	exec(t, pool, `DELETE FROM outbox`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'processed' WHERE event_id = 'evt_a'`)

	n, err := inbox.RepublishPending(t.Context(), pool, 10)
	require.NoError(t, err)
	require.EqualValues(t, 24, n)
	require.Equal(t, 24, count(t, pool, `SELECT count(*) FROM outbox`))
	require.Equal(t, 24, count(t, pool, `SELECT count(DISTINCT message::jsonb->>'event_id') FROM outbox`))
	require.Equal(t, 3, count(t, pool, `SELECT count(DISTINCT created_at) FROM outbox`), "pages of 10, 10 and 4")

	_, err = inbox.RepublishPending(t.Context(), pool, 0)
	require.Error(t, err)
}
