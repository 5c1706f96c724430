// Package message defines the record that travels on the events topic
// (schemas/message.schema.json) and its key. Keys always start with provider
// and source account, and name one resource, so that one resource is always
// handled by one partition, in sequence.
package message

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Kinds of message.
const (
	// KindEvent asks the processor to handle the inbox row EventID.
	KindEvent = "event"
	// KindCheck asks the processor to fetch the resource's current state.
	KindCheck = "check"
)

// Reasons a message was enqueued.
const (
	ReasonWebhook   = "webhook"
	ReasonRetry     = "retry"
	ReasonReplay    = "replay"
	ReasonReconcile = "reconcile"
	// ReasonRefresh: a check the processor sent while settling an event
	// about another resource that says this one changed too (a Stripe
	// invoice's subscription). It is live work, not background.
	ReasonRefresh = "refresh"
)

// Resource is a resource's identity.
type Resource struct {
	Provider      string `json:"provider"`
	SourceAccount string `json:"source_account"`
	Environment   string `json:"environment"`
	Type          string `json:"resource_type"`
	ID            string `json:"resource_id"`
}

// Key is the Kafka record key and the projection's identity.
func (r Resource) Key() string {
	return strings.Join([]string{r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID}, "/")
}

// Message is one record's value.
type Message struct {
	Kind string `json:"kind"`
	Resource
	EventID    string    `json:"event_id,omitempty"`
	EventType  string    `json:"event_type,omitempty"`
	EndpointID string    `json:"endpoint_id,omitempty"`
	EnqueuedAt time.Time `json:"enqueued_at,omitzero"`
	Reason     string    `json:"reason,omitempty"`
	// TraceParent and TraceState are the W3C trace context of the event's
	// intake: the relay continues that trace (a webhook) or links to it (a
	// retry or replay). Empty when tracing was off.
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
	// ListedSeq names the state a reconcile walk's listing returned for
	// the resource (projection.ListedKey: the resource and this number,
	// the listing's fetch start): the processor reads it from
	// reconcile_listed and writes it as an observation of the listing's
	// time, with no provider call, under the same fence and fetch order as
	// a fetch. The record carries the number, never the state: a Kafka
	// record holds identities, no customer data. Only on a check with
	// reason reconcile.
	ListedSeq int64 `json:"listed_seq,omitempty"`
}

// Decode parses and checks a record value.
func Decode(b []byte) (Message, error) {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode message: %w", err)
	}
	switch {
	case m.Kind != KindEvent && m.Kind != KindCheck:
		return m, fmt.Errorf("decode message: unknown kind %q", m.Kind)
	case m.Provider == "" || m.SourceAccount == "" || m.Environment == "":
		return m, fmt.Errorf("decode message: missing provider, account or environment")
	case m.Kind == KindEvent && m.EventID == "":
		return m, fmt.Errorf("decode message: event without event_id")
	case m.Kind == KindCheck && (m.Type == "" || m.ID == ""):
		return m, fmt.Errorf("decode message: check without resource")
	case m.ListedSeq != 0 && (m.Kind != KindCheck || m.ListedSeq < 0):
		return m, fmt.Errorf("decode message: listed_seq only on a check, positive")
	}
	return m, nil
}
