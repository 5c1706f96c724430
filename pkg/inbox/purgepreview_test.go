package inbox_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// A purge's preview counts exactly the rows the purge would touch (finished,
// holding a payload, received before the cutoff) with their oldest and
// newest received_at, and changes nothing.
func TestPurgePreviewCountsWhatThePurgeWouldTouch(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	insert(t, pool, record("evt_old", "sub_1"), record("evt_mid", "sub_1"), record("evt_new", "sub_1"),
		record("evt_dead", "sub_1"), record("evt_gone", "sub_1"))
	legacyLayout(t, pool)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'processed' WHERE event_id <> 'evt_dead'`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'dead' WHERE event_id = 'evt_dead'`)
	exec(t, pool, `UPDATE webhook_inbox SET received_at = now() - interval '5 days' WHERE event_id IN ('evt_old', 'evt_dead', 'evt_gone')`)
	exec(t, pool, `UPDATE webhook_inbox SET received_at = now() - interval '3 days' WHERE event_id = 'evt_mid'`)
	exec(t, pool, `UPDATE webhook_inbox SET payload = NULL, raw_body = NULL WHERE event_id = 'evt_gone'`)

	cutoff := time.Now().Add(-24 * time.Hour)
	p, err := inbox.PreviewPurge(t.Context(), pool, cutoff)
	require.NoError(t, err)
	require.EqualValues(t, 2, p.Rows)
	require.WithinDuration(t, time.Now().Add(-5*24*time.Hour), *p.OldestReceivedAt, time.Minute)
	require.WithinDuration(t, time.Now().Add(-3*24*time.Hour), *p.NewestReceivedAt, time.Minute)

	n, err := inbox.PurgePayloads(t.Context(), pool, cutoff, 1000)
	require.NoError(t, err)
	require.Equal(t, p.Rows, n, "the preview changed nothing, and counted what the purge did")
	p, err = inbox.PreviewPurge(t.Context(), pool, cutoff)
	require.NoError(t, err)
	require.Zero(t, p.Rows)
	require.Nil(t, p.OldestReceivedAt)
}
