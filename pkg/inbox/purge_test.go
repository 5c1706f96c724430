package inbox_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// The purge keeps the provider's time of an event only when it is a time it
// can read: a payload's "created" or "occurred_at" may be any JSON value a
// sender put there (1e300, microseconds, a string, an object), and one such
// row must never make every purge fail. Fails if the conversion can raise
// ("timestamp out of range") for any JSON value.
func TestPurgeSurvivesAnyProviderTimeInPayload(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	values := map[string]string{
		"evt_seconds":     `{"created": 1700000000}`,
		"evt_fraction":    `{"created": 1700000000.25}`,
		"evt_huge":        `{"created": 1e300}`,
		"evt_neg_huge":    `{"created": -1e300}`,
		"evt_micros":      `{"created": 1700000000000000}`,
		"evt_millis":      `{"occurred_at": 1700000000000}`,
		"evt_string":      `{"created": "abc"}`,
		"evt_object":      `{"created": {"a": 1}}`,
		"evt_occurred_ok": `{"occurred_at": 1600000000}`,
		"evt_not_object":  `[1, 2, 3]`,
		"evt_scalar":      `"just a string"`,
	}
	var recs []*inbox.Record
	for id := range values {
		recs = append(recs, record(id, "sub_1"))
	}
	insert(t, pool, recs...)
	legacyLayout(t, pool)
	for id, payload := range values {
		exec(t, pool, `UPDATE webhook_inbox SET status = 'processed', payload = $2::jsonb, received_at = now() - interval '2 days'
WHERE event_id = $1`, id, payload)
	}
	n, err := inbox.PurgePayloads(t.Context(), pool, time.Now().Add(-24*time.Hour), 1000)
	require.NoError(t, err)
	require.EqualValues(t, len(values), n, "every finished payload purged")

	occurred := func(id string) *time.Time {
		var at *time.Time
		require.NoError(t, pool.QueryRow(t.Context(), `SELECT occurred_at FROM webhook_inbox WHERE event_id = $1`, id).Scan(&at))
		return at
	}
	require.Equal(t, int64(1700000000), occurred("evt_seconds").Unix())
	require.Equal(t, int64(1700000000), occurred("evt_fraction").Unix())
	require.Equal(t, int64(1600000000), occurred("evt_occurred_ok").Unix())
	require.Equal(t, int64(1700000000), occurred("evt_millis").Unix(), "milliseconds, read as explain reads them")
	for _, id := range []string{"evt_huge", "evt_neg_huge", "evt_micros", "evt_string", "evt_object", "evt_not_object", "evt_scalar"} {
		require.Nil(t, occurred(id), "%s: a time it cannot read is left unknown", id)
	}
}

// legacyLayout moves every stored body back into the columns of the ledger,
// as rows received before migration 00021 have them: the legacy purge is
// for those rows only (bodies in webhook_inbox_body go with their
// partitions).
func legacyLayout(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	exec(t, pool, `UPDATE webhook_inbox w SET payload = convert_from(b.body, 'UTF8')::jsonb, raw_body = b.body, body_at = NULL
FROM webhook_inbox_body b WHERE b.provider = w.provider AND b.source_account = w.source_account
  AND b.environment = w.environment AND b.event_id = w.event_id AND b.stored_at = w.body_at`)
	exec(t, pool, `DELETE FROM webhook_inbox_body`)
}
