package inbox_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
)

// An erasure takes the bodies of one source account's events (or of one
// customer's resources) out of the inbox, whatever their status and age,
// and keeps every identity, so a late repeat is still recognised; other
// accounts and other resources keep theirs. Fails if the erase leaves a
// payload, raw bytes or a last error of the account, or touches another's.
func TestEraseAccountRemovesBodiesAndKeepsIdentities(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t).Pool
	other := &provider.Endpoint{ID: "stripe-other", Provider: provider.Stripe, SourceAccount: "acct_other", Environment: "test"}
	body := func(id string) []byte {
		return []byte(`{"id":"` + id + `","created":1700000000,"data":{"object":{"email":"jane@example.com"}}}`)
	}
	mine := func(id, sub string) *inbox.Record {
		r := record(id, sub)
		r.Event.Payload, r.Raw = body(id), body(id)
		r.Event.OccurredAt = time.Unix(1700000000, 0) // "created", as the interpreter reads it
		return r
	}
	theirs := &inbox.Record{Endpoint: other, Event: provider.Event{ID: "evt_o", Type: "customer.subscription.updated",
		ResourceType: "subscription", ResourceID: "sub_1", Payload: body("evt_o")}}
	insert(t, pool, mine("evt_1", "sub_1"), mine("evt_2", "sub_1"), mine("evt_3", "sub_2"), theirs)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'processed' WHERE event_id = 'evt_1'`)
	exec(t, pool, `UPDATE webhook_inbox SET status = 'dead', last_error = 'provider said: jane@example.com' WHERE event_id = 'evt_2'`)

	erase := func(resources []string) int64 {
		var n int64
		require.NoError(t, pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
			var err error
			n, err = inbox.EraseAccount(t.Context(), tx, provider.Stripe, endpoint.SourceAccount, "test", resources)
			return err
		}))
		return n
	}
	require.EqualValues(t, 2, erase([]string{"sub_1"}), "one customer's events")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE event_id = 'evt_3' AND body_at IS NOT NULL`),
		"another resource of the account keeps its body")
	require.EqualValues(t, 1, erase(nil), "the rest of the account")
	require.EqualValues(t, 0, erase(nil), "nothing left to erase")

	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE source_account = $1
  AND (body_at IS NOT NULL OR payload IS NOT NULL OR raw_body IS NOT NULL OR last_error LIKE '%jane%')`, endpoint.SourceAccount))
	require.Equal(t, 3, count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE source_account = $1
  AND occurred_at IS NOT NULL`, endpoint.SourceAccount), "identities and the provider's time stay")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox WHERE event_id = 'evt_2' AND status = 'dead' AND last_error = $1`,
		inbox.ErasedError))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM webhook_inbox_body WHERE source_account = 'acct_other' AND convert_from(body, 'UTF8') LIKE '%jane%'`),
		"another account keeps its events")

	res := insert(t, pool, mine("evt_1", "sub_1"))
	require.Equal(t, inbox.Duplicate, res[0], "a late repeat of an erased event is still a repeat")
	exec(t, pool, `INSERT INTO outbox_dead (id, message_key, message, created_at, error) VALUES
  (1, 'stripe/acct_owner/test/subscription/sub_1', 'not json', now(), 'too large'),
  (2, 'stripe/acct_other/test/subscription/sub_1', '{}', now(), 'too large')`)

	var outbox, dead int64
	require.NoError(t, pgx.BeginFunc(t.Context(), pool, func(tx pgx.Tx) error {
		var err error
		outbox, dead, err = inbox.EraseOutbox(t.Context(), tx, "", endpoint.SourceAccount, "", nil)
		return err
	}))
	require.Positive(t, outbox, "the account's unpublished messages go")
	require.Equal(t, 0, count(t, pool, `SELECT count(*) FROM outbox WHERE split_part(message_key, '/', 2) = $1`, endpoint.SourceAccount))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM outbox WHERE message::jsonb->>'source_account' = 'acct_other'`))
	require.EqualValues(t, 1, dead, "a refused message is found by its key, JSON or not")
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM outbox_dead WHERE id = 2`))
}
