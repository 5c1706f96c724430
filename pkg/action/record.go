package action

import "github.com/jackc/pgx/v5"

// Record is an action the processor records in its batch transaction,
// beside the fact it is about (invariant 9: recorded before attempted).
type Record struct {
	Key
	// EventID is the event that asked for it.
	EventID string
	// TraceParent is the recording event's W3C traceparent (nil untraced);
	// the sender's span links to it.
	TraceParent *string
	// Body is what every attempt POSTs, for an effect whose body is not
	// derived from a fact (a transition's); nil for a fact's effect.
	Body []byte
}

// recordSQL records an action once: a repeated or replayed event finds it
// there, whatever became of it, and changes nothing.
const recordSQL = `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, trace_parent, body)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
ON CONFLICT DO NOTHING`

// QueueRecord queues the recording of r into b, for the caller's
// transaction.
func QueueRecord(b *pgx.Batch, r Record) {
	var body *string
	if r.Body != nil {
		s := string(r.Body)
		body = &s
	}
	b.Queue(recordSQL, r.Provider, r.SourceAccount, r.Environment, r.SubjectID, r.Kind, r.EventID, r.TraceParent, body)
}

// OrderedRecord is an action of an ordered kind: a change delivered to a
// subscriber. Its stream is (kind, provider, account, environment,
// OrderKey); the claim takes it only once every action recorded before it
// in its stream is settled (ClaimOrdered).
type OrderedRecord struct {
	Record
	// OrderKey names the stream: the resource the change is about.
	OrderKey string
}

// recordOrderedSQL records an ordered action once; its place in its stream
// is drawn from action_order_seq at the insert, so actions recorded one
// after the other (the feeder's, in the changes topic's order) are ordered
// as recorded. A record seen again (a re-read of the topic) finds its
// action there and changes nothing: its place stays the first one's.
const recordOrderedSQL = `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, trace_parent, body, order_key, order_seq)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, nextval('action_order_seq'))
ON CONFLICT DO NOTHING`

// QueueOrderedRecord queues the recording of r into b, for the caller's
// transaction. Queue a stream's records in its order.
func QueueOrderedRecord(b *pgx.Batch, r OrderedRecord) {
	var body *string
	if r.Body != nil {
		s := string(r.Body)
		body = &s
	}
	b.Queue(recordOrderedSQL, r.Provider, r.SourceAccount, r.Environment, r.SubjectID, r.Kind, r.EventID, r.TraceParent, body, r.OrderKey)
}
