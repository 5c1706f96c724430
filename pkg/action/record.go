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
