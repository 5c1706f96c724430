package projection

import (
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookyard/hookyard/pkg/message"
)

// Refresh is a check the processor sends for a resource an event about
// another resource says changed too (a Stripe invoice's subscription).
type Refresh struct {
	Resource message.Resource
	// EventID is the event that said so: the check's writes name it.
	EventID string
}

// refreshSQL writes one check per row to the outbox, under the resource's
// own key, so the resource's own partition fetches it, in sequence with
// its other messages and under its own fence: the event's partition never
// writes another resource's projection.
const refreshSQL = `
INSERT INTO outbox (message_key, message)
SELECT concat_ws('/', p, a, e, t, id),
       jsonb_build_object('kind', 'check', 'provider', p, 'source_account', a, 'environment', e,
           'resource_type', t, 'resource_id', id, 'event_id', ev, 'enqueued_at', now(), 'reason', 'refresh')
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) AS k(p, a, e, t, id, ev)`

// QueueRefresh queues into b, the transaction that settles the events
// asking for them, the checks of rs.
func QueueRefresh(b *pgx.Batch, rs []Refresh) {
	if len(rs) == 0 {
		return
	}
	cols := make([][]string, 6)
	for _, r := range rs {
		x := r.Resource
		for i, v := range []string{x.Provider, x.SourceAccount, x.Environment, x.Type, x.ID, r.EventID} {
			cols[i] = append(cols[i], v)
		}
	}
	b.Queue(refreshSQL, cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]).Exec(func(pgconn.CommandTag) error { return nil })
}
