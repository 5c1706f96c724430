// Package explain builds one resource's timeline for the operator woken at
// 3 a.m.: every event received for it (arrival time and the provider's own
// time), what the processor decided about each (applied, stale, duplicate,
// conflict, gap, unordered, fenced, ignored, recorded), the provider fetches it made and
// how they ended, and what reconciliation checks found — in the order they
// happened, under the current projection and access decision.
//
// Beside the timeline it lists the external actions about the resource (the
// receipts of a subscription's paid invoices, or an invoice's own), the
// effects its transitions caused and the deliveries of its changes to
// subscribers, with their status and, for those waiting, why.
//
// It owns no table: it reads events, projections, history, divergences and
// actions through the packages that own them (inbox, projection, action).
// It never writes, holds no SQL of its own, and must never call a provider.
package explain

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/subscriber"
)

// LimitDefault is the default of Options.Limit.
const LimitDefault = 100

// Options shape a timeline.
type Options struct {
	// Limit is the most entries the timeline shows, the latest ones.
	// Defaults to LimitDefault.
	Limit int
	// Policy decides access for subscriptions.
	Policy access.Policy
	// Now is the clock of the access decision. Defaults to time.Now.
	Now func() time.Time
	// ActionsWaiting says, per action kind, why pending actions of that
	// kind are not being sent (no receipt URL configured). Defaults to none.
	ActionsWaiting map[string]string
}

// Kinds of Entry.
const (
	// KindReceived: an event arrived (one per inbox row).
	KindReceived = "received"
	// KindDecision: what the processor did with an event: applied, stale,
	// duplicate, conflict, gap, unordered, fenced, recorded; ignored for an event type
	// the endpoint does not accept.
	KindDecision = "decision"
	// KindFetch: a provider fetch for an event without a version.
	KindFetch = "fetch"
	// KindReconcile: a reconciliation check, the provider fetch it made and
	// what it found.
	KindReconcile = "reconcile"
)

// Results of a fetch (KindFetch and KindReconcile entries).
const (
	FetchSuccess  = "success"
	FetchNotFound = "not_found"
	FetchError    = "error"
)

// Timeline is a resource's story.
type Timeline struct {
	Key      string           `json:"key"`
	Resource message.Resource `json:"resource"`
	// Projection is nil when there is none.
	Projection *projection.Projection `json:"projection"`
	// Access is the access decision now, for subscriptions.
	Access *access.Decision `json:"access,omitempty"`
	// Entries are in the order things happened, oldest first.
	Entries []Entry `json:"timeline"`
	// Truncated: older entries exist than the ones shown.
	Truncated bool `json:"truncated"`
	// Actions are the external effects about the resource, newest first:
	// those about its facts (up to Limit), and those its observations
	// caused — its transitions' effects and its changes' deliveries to
	// subscribers (up to Limit).
	Actions []ActionEntry `json:"actions"`
	// Divergences the reconciler recorded, newest first.
	Divergences []projection.Divergence `json:"divergences"`
}

// ActionEntry is an external action, what caused it, and, while it is
// pending, why it is not being sent when that is known.
type ActionEntry struct {
	action.Action
	// Cause is CauseFact, CauseTransition or CauseChange.
	Cause   string `json:"cause"`
	Waiting string `json:"waiting,omitempty"`
}

// Causes of an ActionEntry.
const (
	// CauseFact: an effect of a fact (a paid invoice's receipt).
	CauseFact = "fact"
	// CauseTransition: an effect of one of the resource's transitions,
	// keyed "<type>/<id>@v<version>" (or "@f<fetch seq>").
	CauseTransition = "transition"
	// CauseChange: a change of the resource delivered to a subscriber
	// (kind "change:<subscriber>"), keyed like a transition's effect.
	CauseChange = "change"
)

// Entry is one line of a timeline.
type Entry struct {
	// At is when it happened: received_at for KindReceived, when the
	// processor recorded it for the others.
	At        time.Time `json:"at"`
	Kind      string    `json:"kind"`
	EventID   string    `json:"event_id,omitempty"`
	EventType string    `json:"event_type,omitempty"`

	// KindReceived: arrival, the provider's own time of the event when
	// known, and where the event stands now.
	ReceivedAt    *time.Time `json:"received_at,omitempty"`
	ProviderTime  *time.Time `json:"provider_time,omitempty"`
	EventStatus   string     `json:"event_status,omitempty"`
	EventOutcome  string     `json:"event_outcome,omitempty"`
	Attempts      int        `json:"attempts,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`

	// Outcome is the decision (KindDecision) or the recorded outcome of a
	// fetch (fetched, fetch_failed, fetch_not_found).
	Outcome string `json:"outcome,omitempty"`
	// Result of a fetch: success, not_found, error.
	Result string `json:"result,omitempty"`
	// Finding of a successful check: in_sync, diverged, missing.
	Finding string `json:"finding,omitempty"`
	Version *int64 `json:"provider_version,omitempty"`
	// Status and Deleted are the state the entry is about; PreviousStatus
	// is the projection it found ("" for none).
	Status         string  `json:"status,omitempty"`
	Deleted        bool    `json:"deleted,omitempty"`
	PreviousStatus *string `json:"previous_status,omitempty"`
	Generation     int64   `json:"fence_generation,omitempty"`
	Detail         string  `json:"detail,omitempty"`

	seq int64 // orders entries with equal At
}

// Build reads r's timeline.
func Build(ctx context.Context, pool *pgxpool.Pool, r message.Resource, opts Options) (Timeline, error) {
	opts.Limit = cmp.Or(opts.Limit, LimitDefault)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	t := Timeline{Key: r.Key(), Resource: r}
	p, err := projection.Get(ctx, pool, r)
	switch {
	case errors.Is(err, projection.ErrNotFound):
	case err != nil:
		return t, fmt.Errorf("explain %s: %w", r.Key(), err)
	default:
		t.Projection = &p
	}
	if r.Type == "subscription" {
		d := access.Decision{Reason: "unknown_subscription"}
		if t.Projection != nil {
			d = access.Decide(*t.Projection, opts.Policy, opts.Now())
		}
		t.Access = &d
	}
	events, err := readEvents(ctx, pool, r, opts.Limit)
	if err != nil {
		return t, fmt.Errorf("explain %s: %w", r.Key(), err)
	}
	hist, err := projection.History(ctx, pool, r, opts.Limit)
	if err != nil {
		return t, fmt.Errorf("explain %s: %w", r.Key(), err)
	}
	t.Entries, t.Truncated = merge(events, hist, opts.Limit)
	acts, err := action.ForResource(ctx, pool, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, opts.Limit)
	if err != nil {
		return t, fmt.Errorf("explain %s: %w", r.Key(), err)
	}
	caused, err := action.CausedBy(ctx, pool, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, opts.Limit)
	if err != nil {
		return t, fmt.Errorf("explain %s: %w", r.Key(), err)
	}
	t.Actions = make([]ActionEntry, 0, len(acts)+len(caused))
	for _, a := range acts {
		t.Actions = append(t.Actions, actionEntry(a, CauseFact, opts))
	}
	for _, a := range caused {
		cause := CauseTransition
		if strings.HasPrefix(a.Kind, subscriber.KindPrefix) {
			cause = CauseChange
		}
		t.Actions = append(t.Actions, actionEntry(a, cause, opts))
	}
	slices.SortStableFunc(t.Actions, func(a, b ActionEntry) int { return b.CreatedAt.Compare(a.CreatedAt) })
	if t.Divergences, err = projection.Divergences(ctx, pool, r, opts.Limit); err != nil {
		return t, fmt.Errorf("explain %s: %w", r.Key(), err)
	}
	return t, nil
}

func actionEntry(a action.Action, cause string, opts Options) ActionEntry {
	e := ActionEntry{Action: a, Cause: cause}
	if a.Status == action.StatusPending {
		e.Waiting = opts.ActionsWaiting[a.Kind]
	}
	return e
}

// event is an inbox row as the timeline needs it.
type event struct {
	id, typ, status            string
	outcome, lastErr           *string
	version                    *int64
	attempts                   int
	nextAttempt                *time.Time
	received                   time.Time
	occurred                   *time.Time
	created, occurredAt, stamp []byte
}

func readEvents(ctx context.Context, pool *pgxpool.Pool, r message.Resource, limit int) ([]event, error) {
	arrivals, err := inbox.Arrivals(ctx, pool, r, limit)
	if err != nil {
		return nil, err
	}
	out := make([]event, 0, len(arrivals))
	for _, a := range arrivals {
		out = append(out, event{id: a.EventID, typ: a.EventType, status: a.Status, outcome: a.Outcome, lastErr: a.LastError,
			version: a.Version, attempts: a.Attempts, nextAttempt: a.NextAttemptAt, received: a.ReceivedAt, occurred: a.OccurredAt,
			created: a.Created, occurredAt: a.PayloadOccurredAt, stamp: a.Timestamp})
	}
	return out, nil
}

// providerTime is the event's time as its provider states it.
func (e event) providerTime() *time.Time {
	if e.occurred != nil {
		return e.occurred
	}
	for _, raw := range [][]byte{e.created, e.occurredAt, e.stamp} {
		if t, ok := parseTime(raw); ok {
			return &t
		}
	}
	return nil
}

// parseTime reads a JSON number of Unix seconds (milliseconds when it is
// too large for seconds) or an RFC 3339 string.
func parseTime(raw []byte) (time.Time, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return time.Time{}, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t, err == nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		return time.Time{}, false
	}
	if f > 1e11 { // past the year 5138 in seconds: milliseconds
		f /= 1000
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}

// merge interleaves events and history by time. Each source was read newest
// first up to limit; where one was cut short, anything older than its
// oldest entry may be missing from it, so the timeline starts there.
func merge(events []event, hist []projection.HistoryEntry, limit int) ([]Entry, bool) {
	truncated := false
	var since time.Time
	if len(events) == limit {
		truncated, since = true, events[len(events)-1].received
	}
	if len(hist) == limit {
		truncated = true
		if h := hist[len(hist)-1].RecordedAt; h.After(since) {
			since = h
		}
	}
	types := make(map[string]string, len(events))
	out := make([]Entry, 0, len(events)+len(hist))
	for i, e := range events {
		types[e.id] = e.typ
		if e.received.Before(since) {
			continue
		}
		out = append(out, received(e, -int64(i+1)))
		if e.status == "ignored" {
			out = append(out, Entry{At: e.received, Kind: KindDecision, EventID: e.id, EventType: e.typ,
				Outcome: "ignored", Detail: cmp.Or(deref(e.outcome), "event type not accepted by the endpoint"), seq: 0})
		}
	}
	for _, h := range hist {
		if h.RecordedAt.Before(since) {
			continue
		}
		out = append(out, fromHistory(h, types[h.EventID]))
	}
	slices.SortStableFunc(out, func(a, b Entry) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.seq, b.seq))
	})
	if len(out) > limit {
		out, truncated = out[len(out)-limit:], true
	}
	return out, truncated
}

// received is an event's arrival. seq is negative so an arrival sorts
// before what was recorded in the same instant (history ids are positive).
func received(e event, seq int64) Entry {
	at := e.received
	return Entry{At: at, Kind: KindReceived, EventID: e.id, EventType: e.typ, ReceivedAt: &at,
		ProviderTime: e.providerTime(), EventStatus: e.status, EventOutcome: deref(e.outcome), Attempts: e.attempts,
		NextAttemptAt: e.nextAttempt, LastError: deref(e.lastErr), Version: e.version, seq: seq}
}

func fromHistory(h projection.HistoryEntry, eventType string) Entry {
	e := Entry{At: h.RecordedAt, Kind: KindDecision, EventID: h.EventID, EventType: eventType, Outcome: h.Outcome,
		Version: h.Version, Status: h.Status, Deleted: h.Deleted, PreviousStatus: h.Previous, Generation: h.Generation,
		Detail: h.Detail, seq: h.ID}
	switch h.Outcome {
	case projection.Fetched:
		e.Kind, e.Result = KindFetch, FetchSuccess
	case projection.FetchNotFound:
		e.Kind, e.Result = KindFetch, FetchNotFound
	case projection.FetchFailed:
		e.Kind, e.Result = KindFetch, FetchError
	}
	if h.EventID == "" && (e.Kind == KindFetch || h.Outcome == projection.Recorded) {
		// No event: a check the reconciler sent.
		e.Kind = KindReconcile
		if e.Result == FetchSuccess && h.Previous != nil {
			e.Finding = projection.Finding(*h.Previous, h.Status, h.Deleted)
		}
	}
	return e
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
