package reconciler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
)

// eventWalk is the cursor of an events walk in progress: the lower bound it
// started with (kept across an interruption, so the walk resumes the same
// listing), where it stands, and the newest event time it saw.
type eventWalk struct {
	Since  time.Time `json:"since"`
	Cursor string    `json:"cursor,omitempty"`
	Newest time.Time `json:"newest,omitzero"`
}

// maxIdentityLen is the receiver's bound on event and resource ids (a btree
// entry holds about 2.7 kB).
const maxIdentityLen = 512

// scanEvents walks the source's events list from its checkpoint's high
// water minus the overlap and ingests every event the endpoint accepts
// through intake, as if it had been delivered: same identity (the
// adapter's Identify), the endpoint's account and environment, so a real
// delivery later is a duplicate, and one already received is one now.
func (r *Reconciler) scanEvents(ctx context.Context, s provider.Source, rep *SourceReport) error {
	lr := rep.listing(ListingEvents)
	if s.Endpoint == nil || s.Identify == nil {
		lr.Error = "no endpoint or identity reader to ingest events under"
		return fmt.Errorf("scan %s events: %s", s.Name(), lr.Error)
	}
	if ep := s.Endpoint; ep.Provider != s.Provider || ep.SourceAccount != s.SourceAccount || ep.Environment != s.Environment {
		// Events are stored under the endpoint's identity; a source that
		// names another would read one account and file it as another.
		lr.Error = fmt.Sprintf("endpoint %q is %s/%s/%s, not the source's", ep.ID, ep.Provider, ep.SourceAccount, ep.Environment)
		return fmt.Errorf("scan %s events: %s", s.Name(), lr.Error)
	}
	// Provider reads share the account's quota with the processor's
	// fetches, inside the smaller background share where the client keeps one.
	ctx = provider.Background(ctx)
	cp, err := LoadCheckpoint(ctx, r.pool, s.Name(), ListingEvents)
	if err != nil {
		return err
	}
	var w eventWalk
	if cp.Cursor != "" {
		if err := json.Unmarshal([]byte(cp.Cursor), &w); err != nil {
			r.log.WarnContext(ctx, "unreadable events checkpoint; starting the walk again", "source", s.Name(), "error", err.Error())
			w = eventWalk{}
		}
		lr.ResumedAt = w.Cursor
	}
	if w.Since.IsZero() {
		// Events are listed by when they were created; one created just
		// before the last walk's newest may have become visible only after
		// it (the provider's list is not a log we read at one instant).
		w.Since = r.walkStart(cp.HighWater)
	}
	restarted := false
	for {
		page, err := s.Events.ListEvents(ctx, w.Since, w.Cursor, r.cfg.PageSize)
		if err != nil && w.Cursor != "" && !restarted && errors.Is(err, provider.ErrCursorGone) {
			// Once per round: a walk from the lower bound that fails the
			// same way is not a cursor problem.
			r.log.WarnContext(ctx, "events cursor no longer known to the provider; walking again from the lower bound",
				"source", s.Name(), "since", w.Since, "error", err.Error())
			restarted, w.Cursor = true, ""
			continue
		}
		if err != nil {
			err = fmt.Errorf("list %s events for %s/%s: %w", s.Provider, s.SourceAccount, s.Environment, err)
			return r.interrupted(ctx, s, lr, mustJSON(w), err)
		}
		lr.Pages++
		n, err := r.ingest(ctx, s, page.Events, rep)
		rep.EventsIngested += n
		r.ingested.WithLabelValues(s.Provider).Add(float64(n))
		if err != nil {
			return r.interrupted(ctx, s, lr, mustJSON(w), err)
		}
		for _, ev := range page.Events {
			if ev.At.After(w.Newest) {
				w.Newest = ev.At
			}
		}
		if page.Next == "" || len(page.Events) == 0 {
			lr.Complete = true
			var hw *time.Time
			if !w.Newest.IsZero() {
				hw = &w.Newest
			}
			return saveComplete(ctx, r.pool, s.Name(), ListingEvents, hw)
		}
		w.Cursor = page.Next
		if err := saveProgress(ctx, r.pool, s.Name(), ListingEvents, mustJSON(w), nil); err != nil {
			return err
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("reconciler: encode cursor: %v", err)) // plain struct: cannot fail
	}
	return string(b)
}

// ingest stores the listed events the endpoint accepts, each with its
// outbox row, in the receiver's intake statement, and says how many were
// new. An event the endpoint does not accept is left out (its delivery
// would be stored as ignored; nothing is lost). One whose identity the
// adapter refuses (another account or mode) is skipped and reported.
func (r *Reconciler) ingest(ctx context.Context, s provider.Source, evs []provider.ListedEvent, rep *SourceReport) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	now := r.now()
	recs := make([]*inbox.Record, 0, len(evs))
	for _, le := range evs {
		ev, err := s.Identify.Identify(s.Endpoint, le.Body, now)
		rec := &inbox.Record{Endpoint: s.Endpoint, Event: ev}
		switch {
		case err == nil:
			if err := storable(&ev); err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("event %.64s: %v", le.ID, err))
				continue
			}
		case errors.Is(err, provider.ErrVersionFromFuture):
			// As the receiver does: kept dead under its identity, never applied.
			rec.Malformed, rec.DeadOutcome = err.Error(), inbox.OutcomeVersionFromFuture
		default:
			rep.Errors = append(rep.Errors, fmt.Sprintf("event %.64s: %v", le.ID, err))
			continue
		}
		if !s.Endpoint.Allows(ev.Type) {
			continue
		}
		if s.Endpoint.StoreRaw {
			rec.Raw = le.Body
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	res, err := inbox.Insert(ctx, r.pool, recs, now)
	if err != nil {
		return 0, fmt.Errorf("ingest %d listed events: %w", len(recs), err)
	}
	var n int64
	for _, x := range res {
		if x == inbox.Accepted {
			n++
		}
	}
	return n, nil
}

// storable is the receiver's check that Postgres can store and index the
// event's identity (a refused row would fail the whole batch).
func storable(ev *provider.Event) error {
	for _, v := range []string{ev.ID, ev.Type, ev.ResourceType, ev.ResourceID} {
		if len(v) > maxIdentityLen || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: identity Postgres cannot store", provider.ErrMalformed)
		}
	}
	return nil
}
