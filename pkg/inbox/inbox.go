// Package inbox owns webhook_inbox: durable intake of verified events (with
// their outbox rows, in one statement), and their processing state. Every
// statement over webhook_inbox is here: intake, the processor's batch load
// and marks (QueueMarks, queued into the processor's own transaction, so an
// event is marked with its effect), retries, replays, requeues and purges,
// the reconciler's lookups, and the reads of the ops tools and gauges.
//
// It must never acknowledge an event before its inbox row and outbox row are
// committed together, and never decide identity with a SELECT before an
// INSERT: concurrent copies of one event race on the primary key.
package inbox

import (
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Statuses of an inbox row.
const (
	StatusPending   = "pending"
	StatusProcessed = "processed"
	StatusIgnored   = "ignored"
	StatusRetrying  = "retrying"
	StatusDead      = "dead"
)

// Outcomes of events kept dead at intake.
const (
	OutcomeMalformed         = "malformed"
	OutcomeVersionFromFuture = "version_from_future"
)

// Key is an event's identity.
type Key struct {
	Provider      string
	SourceAccount string
	Environment   string
	EventID       string
}

// Record is a verified event ready to be stored.
type Record struct {
	Endpoint *provider.Endpoint
	Event    provider.Event
	// Ignored marks an event outside the endpoint's allow-list: stored so the
	// provider stops retrying, never processed.
	Ignored bool
	// Malformed is set for an authenticated delivery we cannot read: it is
	// stored dead, with this reason, to be inspected rather than lost.
	Malformed string
	// DeadOutcome is the outcome a record kept dead is stored with.
	// Defaults to "malformed"; e.g. "version_from_future".
	DeadOutcome string
	// Raw is the body as received, set when the endpoint asks for it kept.
	// Every event's body is now stored once (webhook_inbox_body), as
	// Event.Payload: the bytes received for every JSON delivery, whatever
	// store_raw says; for a form-encoded GitHub delivery, the JSON document
	// the form carried (what the processor reads), not the form around it.
	Raw []byte
	// TraceParent and TraceState are the W3C trace context of the intake
	// (Submit sets them from its span): carried in the outbox message, and
	// the traceparent kept on the row for retries and replays to link to.
	TraceParent, TraceState string

	prep *prepared
}

// prepared is a record encoded for the insert statement.
type prepared struct {
	status, key, msg string
	outcome          *string
	body             []byte
	lastErr          *string
	traceParent      *string
}

// prepare encodes the record's columns and outbox message.
func (r *Record) prepare(now time.Time) error {
	msg, err := r.Message(now)
	if err != nil {
		return fmt.Errorf("encode outbox message: %w", err)
	}
	p := &prepared{status: StatusPending, key: r.Resource().Key(), msg: string(msg), body: r.Event.Payload}
	if p.body == nil {
		p.body = []byte{} // a body row is never NULL: an event without a body stored empty
	}
	if r.TraceParent != "" {
		p.traceParent = &r.TraceParent
	}
	switch {
	case r.Malformed != "":
		outcome := cmp.Or(r.DeadOutcome, OutcomeMalformed)
		p.status, p.lastErr, p.outcome = StatusDead, &r.Malformed, &outcome
	case r.Ignored:
		p.status = StatusIgnored
	}
	r.prep = p
	return nil
}

// Key returns the record's event identity.
func (r *Record) Key() Key {
	return Key{r.Endpoint.Provider, r.Endpoint.SourceAccount, r.Endpoint.Environment, r.Event.ID}
}

// Resource returns the resource the record's message is keyed by. An event
// about no resource is keyed by its own id so it still has one partition.
func (r *Record) Resource() message.Resource {
	rt, id := r.Event.ResourceType, r.Event.ResourceID
	if id == "" {
		rt, id = "event", r.Event.ID
	}
	return message.Resource{Provider: r.Endpoint.Provider, SourceAccount: r.Endpoint.SourceAccount,
		Environment: r.Endpoint.Environment, Type: rt, ID: id}
}

// Message returns the outbox message for the record.
func (r *Record) Message(now time.Time) ([]byte, error) {
	return json.Marshal(message.Message{
		Kind: message.KindEvent, Resource: r.Resource(), EventID: r.Event.ID, EventType: r.Event.Type,
		EndpointID: r.Endpoint.ID, EnqueuedAt: now.UTC(), Reason: message.ReasonWebhook,
		TraceParent: r.TraceParent, TraceState: r.TraceState,
	})
}
