package provider

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// StoredEvent is an event as the inbox keeps it: what the receiver read
// from a verified delivery (or the reconciler from a listed event), read
// back by the processor. Its provider, account and environment are the
// endpoint's and are not repeated here.
type StoredEvent struct {
	// EventType is the provider's event type.
	EventType string
	// ResourceType and ResourceID name the resource the event is about;
	// empty when it is about none we track.
	ResourceType string
	ResourceID   string
	// Version is the resource's version when the provider sent one.
	Version *int64
	// Payload is the event's body as JSON.
	Payload []byte
}

// Interpreter reads what a stored event asks of the processor. It must be
// a pure function of the event and the endpoint: the processor calls it
// again for every retry and replay of the event and expects the same Plan.
type Interpreter interface {
	// Interpret returns the event's Plan. ep is the endpoint the event came
	// in through, nil when the config no longer names it. An event that can
	// never be read returns an error wrapping ErrMalformed: the processor
	// kills it at once (kept for inspection) instead of retrying it.
	Interpret(ev StoredEvent, ep *Endpoint) (Plan, error)
}

// Plan is what one event asks for. The zero Plan asks for nothing: the
// event is recorded and marked processed.
type Plan struct {
	// Snapshot is a versioned state to apply; nil when the event carries
	// none.
	Snapshot *Snapshot
	// Fetch asks for the resource's current state from the provider (the
	// event is a hint): the processor calls the provider's Fetcher.
	Fetch bool
	// Facts are recorded by their own identity, whatever the resource's
	// state (an invoice paid).
	Facts []Fact
	// Actions are external effects to record under a stable key.
	Actions []Action
	// Refresh names other resources of the event's account and environment
	// that the event says changed too (Stripe: the subscription of an
	// invoice whose own event projects the invoice). The processor sends
	// each, in the transaction that settles the event, as a check under
	// the resource's own key: its partition fetches it in sequence with
	// the resource's other messages, under its own fence. Never the
	// event's own resource.
	Refresh []ResourceRef
}

// ResourceRef names a resource of the event's account and environment.
type ResourceRef struct {
	Type, ID string
}

// Snapshot is a resource's state at a version.
type Snapshot struct {
	Version int64
	// State is the resource as JSON.
	State []byte
	// Status is the resource's status as the provider names it.
	Status string
	// Deleted marks a deletion: the projection keeps a tombstone.
	Deleted bool
}

// Fact is something that happened, recorded under (Type, ID), e.g. an
// invoice paid. Facts are declared (config `facts`, package fact), not
// coded: a provider only says where an event's object is (FactObjecter).
type Fact struct {
	Type, ID string
	// ResourceType and ResourceID are the resource the fact is about when
	// its declaration links one; empty: the event's resource.
	ResourceType, ResourceID string
	// Data is the fact's document as JSON.
	Data []byte
}

// FactObjecter is the capability of a provider whose events carry an
// object a fact is read from: it says where that object is by default (a
// dotted path into the event; "" for the whole event), e.g. Stripe's
// data.object. A fact's declaration may name another path.
type FactObjecter interface {
	FactObject(ev StoredEvent) string
}

// Action is an external effect of kind Kind about Subject (e.g. a receipt
// for an invoice), recorded under the stable key (account, Subject, Kind).
type Action struct {
	Subject, Kind string
}

// MaxIdentityLen bounds every identity read from a body (an event's, a
// resource's, a fact's, an action's subject): the same 512 bytes the
// receiver allows an event and resource id. Postgres refuses a btree index
// row over about 2.7 kB (54000), so an unbounded id in a primary key would
// fail every retry of its batch.
const MaxIdentityLen = 512

// CheckIdentity returns an error wrapping ErrMalformed when v, the identity
// named what, cannot be stored as a key: longer than MaxIdentityLen, not
// valid UTF-8, or holding a NUL (which Postgres text refuses).
func CheckIdentity(what, v string) error {
	switch {
	case len(v) > MaxIdentityLen:
		return fmt.Errorf("%w: %s longer than %d bytes", ErrMalformed, what, MaxIdentityLen)
	case !utf8.ValidString(v) || strings.ContainsRune(v, 0):
		return fmt.Errorf("%w: %s is not storable text", ErrMalformed, what)
	}
	return nil
}

// Validate checks every identity the plan derived from the event's body,
// so an unstorable one makes the event malformed (dead at once, kept)
// instead of a database error its batch would meet on every retry.
func (p Plan) Validate() error {
	for _, f := range p.Facts {
		if err := CheckIdentity("fact type", f.Type); err != nil {
			return err
		}
		if err := CheckIdentity("fact id", f.ID); err != nil {
			return err
		}
		if err := CheckIdentity("fact resource id", f.ResourceID); err != nil {
			return err
		}
	}
	for _, r := range p.Refresh {
		if err := CheckIdentity("refreshed resource type", r.Type); err != nil {
			return err
		}
		if err := CheckIdentity("refreshed resource id", r.ID); err != nil {
			return err
		}
	}
	for _, a := range p.Actions {
		if err := CheckIdentity("action subject", a.Subject); err != nil {
			return err
		}
		if err := CheckIdentity("action kind", a.Kind); err != nil {
			return err
		}
	}
	return nil
}
