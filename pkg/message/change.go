package message

import (
	"encoding/json"
	"fmt"
	"time"
)

// Decisions a Change records: how the projection's new state was decided.
const (
	// DecisionApplied: a versioned snapshot (or tombstone) whose version
	// was greater than the stored one.
	DecisionApplied = "applied"
	// DecisionFetched: state fetched from the provider's API (or listed by
	// a reconcile walk) that differs from the stored one.
	DecisionFetched = "fetched"
	// DecisionCurrent: no write; the stored projection published again
	// (`hookyard changes republish`), e.g. one stored before changes were
	// published.
	DecisionCurrent = "current"
)

// Change is one record of the compacted changes topic
// (schemas/change.schema.json), keyed like the resource's events
// (Resource.Key). Every write that changed a projection has one, published
// in the order of the resource's writes, so the last record of each key is
// the resource's current projection: a consumer that reads the topic from
// the beginning rebuilds every projection. Delivery is at least once: a
// record may come twice (a relay that lost its claim), never out of order.
//
// The processor's projection statement writes it (its JSON is built in
// SQL, from the row as stored); this type is how Go reads it.
type Change struct {
	Resource
	// Decision is DecisionApplied, DecisionFetched or DecisionCurrent.
	Decision string `json:"decision"`
	// EventID is the event whose write this is; empty for a reconciliation
	// check (the provider's state, fetched or listed, with no event).
	EventID string `json:"event_id"`
	// FenceGeneration is the writer's fencing generation.
	FenceGeneration int64 `json:"fence_generation"`
	// Version is the provider's version of the state (versioned providers);
	// nil for state fetched from a provider without versions. A versioned
	// resource's state fetched by a reconciliation check keeps the stored
	// version beside its fetch time.
	Version *int64 `json:"provider_version"`
	// FetchSeq orders fetched observations of one resource (increasing per
	// resource); FetchedAt is the database clock when the fetch started.
	// Both nil for a resource never fetched.
	FetchSeq  *int64     `json:"fetch_seq"`
	FetchedAt *time.Time `json:"fetched_at"`
	Status    string     `json:"status"`
	// Deleted marks a tombstone: the resource is gone, State is its last
	// known state. It is a record like any other (not a Kafka tombstone), so
	// compaction keeps it, as the projection keeps its tombstone row.
	Deleted bool            `json:"deleted"`
	State   json.RawMessage `json:"state"`
	// ChangedAt is when the projection was written (database clock).
	ChangedAt time.Time `json:"changed_at"`
}

// DecodeChange parses and checks a changes-topic record value.
func DecodeChange(b []byte) (Change, error) {
	var c Change
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("decode change: %w", err)
	}
	switch {
	case c.Provider == "" || c.SourceAccount == "" || c.Environment == "" || c.Type == "" || c.ID == "":
		return c, fmt.Errorf("decode change: missing resource identity")
	case c.Decision != DecisionApplied && c.Decision != DecisionFetched && c.Decision != DecisionCurrent:
		return c, fmt.Errorf("decode change: unknown decision %q", c.Decision)
	case c.Version == nil && c.FetchSeq == nil && c.FetchedAt == nil:
		return c, fmt.Errorf("decode change: neither a provider version nor a fetch time")
	case len(c.State) == 0:
		return c, fmt.Errorf("decode change: no state")
	}
	return c, nil
}
