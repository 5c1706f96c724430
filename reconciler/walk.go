package reconciler

// The listing engine: a source's three walks (its resources, its events,
// its hook's deliveries), each paging from its checkpoint, resuming where an
// interrupted walk stopped and recording a walk complete only when it
// reached its end. What a walk does with each page lives beside the
// statements it runs: checkListed (listing.go), ingest (events.go),
// redeliver (deliveries.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Listings a source can be walked by, as reconcile_checkpoint names them.
const (
	// ListingEvents is the provider's events list (Stripe GET /v1/events,
	// Chargebee GET /api/v2/events).
	ListingEvents = "events"
	// ListingDeliveries is a GitHub hook's deliveries.
	ListingDeliveries = "deliveries"
)

// listingOf names the resource listing of a resource type, e.g.
// "subscriptions".
func listingOf(resourceType string) string { return resourceType + "s" }

// Checkpoint is where a source's listing stands.
type Checkpoint struct {
	Source  string `json:"source"`
	Listing string `json:"listing"`
	// Cursor is where an interrupted walk resumes; empty when the last walk
	// completed (the next one starts from the beginning, or from HighWater).
	Cursor string `json:"cursor,omitempty"`
	// HighWater is the newest provider time a complete walk saw (events,
	// deliveries); the next walk starts there minus the overlap.
	HighWater *time.Time `json:"high_water,omitempty"`
	// LastCompleteAt is when a walk last reached its end.
	LastCompleteAt *time.Time `json:"last_complete_at,omitempty"`
	LastError      string     `json:"last_error,omitempty"`
	UpdatedAt      time.Time  `json:"updated_at"`
}

const loadCheckpointSQL = `
SELECT coalesce(cursor, ''), high_water, last_complete_at, coalesce(last_error, ''), updated_at
FROM reconcile_checkpoint WHERE source = $1 AND listing = $2`

// LoadCheckpoint reads a listing's checkpoint; a listing never walked has
// the zero one.
func LoadCheckpoint(ctx context.Context, pool *pgxpool.Pool, source, listing string) (Checkpoint, error) {
	cp := Checkpoint{Source: source, Listing: listing}
	err := pool.QueryRow(ctx, loadCheckpointSQL, source, listing).Scan(&cp.Cursor, &cp.HighWater, &cp.LastCompleteAt, &cp.LastError, &cp.UpdatedAt)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return cp, fmt.Errorf("load checkpoint %s %s: %w", source, listing, err)
	}
	return cp, nil
}

// progressSQL records a walk's position after a page, or where it stopped
// and why. It never touches last_complete_at: an interrupted walk is not a
// complete one.
const progressSQL = `
INSERT INTO reconcile_checkpoint (source, listing, cursor, last_error, updated_at)
VALUES ($1, $2, nullif($3, ''), nullif($4, ''), now())
ON CONFLICT (source, listing) DO UPDATE
SET cursor = EXCLUDED.cursor, last_error = EXCLUDED.last_error, updated_at = now()`

// completeSQL records a walk that reached its end: the cursor is reset, the
// high water only moves forward.
const completeSQL = `
INSERT INTO reconcile_checkpoint (source, listing, cursor, high_water, last_complete_at, last_error, updated_at)
VALUES ($1, $2, NULL, $3, now(), NULL, now())
ON CONFLICT (source, listing) DO UPDATE
SET cursor = NULL, last_error = NULL, last_complete_at = now(), updated_at = now(),
    high_water = CASE WHEN reconcile_checkpoint.high_water IS NULL THEN EXCLUDED.high_water
                      ELSE greatest(reconcile_checkpoint.high_water, EXCLUDED.high_water) END`

// saveProgress stores the cursor of a walk in progress, and the error that
// stopped it if any. The context of a round that is stopping may be over;
// the checkpoint is still written, briefly, so a restart resumes there.
func saveProgress(ctx context.Context, pool *pgxpool.Pool, source, listing, cursor string, walkErr error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	msg := ""
	if walkErr != nil {
		msg = walkErr.Error()
	}
	if _, err := pool.Exec(ctx, progressSQL, source, listing, cursor, msg); err != nil {
		return fmt.Errorf("save checkpoint %s %s: %w", source, listing, err)
	}
	return nil
}

func saveComplete(ctx context.Context, pool *pgxpool.Pool, source, listing string, highWater *time.Time) error {
	if _, err := pool.Exec(ctx, completeSQL, source, listing, highWater); err != nil {
		return fmt.Errorf("complete checkpoint %s %s: %w", source, listing, err)
	}
	return nil
}

// Checkpoints lists every checkpoint, for `hookyard reconcile` and tests.
func Checkpoints(ctx context.Context, pool *pgxpool.Pool) ([]Checkpoint, error) {
	rows, err := pool.Query(ctx, `SELECT source, listing, coalesce(cursor, ''), high_water, last_complete_at, coalesce(last_error, ''), updated_at
FROM reconcile_checkpoint ORDER BY source, listing`)
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Checkpoint, error) {
		var cp Checkpoint
		err := r.Scan(&cp.Source, &cp.Listing, &cp.Cursor, &cp.HighWater, &cp.LastCompleteAt, &cp.LastError, &cp.UpdatedAt)
		return cp, err
	})
}

// walkListing pages through a source's resources from its checkpoint
// (a walk interrupted by an error resumes where it stopped), checking
// what diverged.
func (r *Reconciler) walkListing(ctx context.Context, s provider.Source, rep *SourceReport) error {
	// The source's provider calls share its credentials' quota with the
	// processor's fetches, inside the smaller background share.
	ctx = provider.Background(ctx)
	listing := listingOf(s.ResourceType)
	lr := rep.listing(listing)
	cp, err := LoadCheckpoint(ctx, r.pool, s.Name(), listing)
	if err != nil {
		return err
	}
	after := cp.Cursor
	lr.ResumedAt = after
	terminal := terminal(s)
	restarted := false
	for {
		listedAt, err := projection.StartFetch(ctx, r.pool)
		if err != nil {
			return r.interrupted(ctx, s, lr, after, err)
		}
		items, more, err := s.Lister.ListObjects(ctx, s.APIAccount, s.ResourceType, after, r.cfg.PageSize)
		if err != nil && after != "" && !restarted && errors.Is(err, provider.ErrCursorGone) {
			// The object the walk stopped after is gone; the listing has no
			// other lower bound, so the walk starts again (once per round:
			// a walk from the start that fails so is not a cursor problem).
			r.log.WarnContext(ctx, "listing cursor no longer known to the provider; walking again from the start",
				"source", s.Name(), "listing", listing, "error", err.Error())
			restarted, after = true, ""
			continue
		}
		if err != nil {
			err = fmt.Errorf("list %s %s for %s/%s: %w", s.Provider, s.ResourceType, s.SourceAccount, s.Environment, err)
			return r.interrupted(ctx, s, lr, after, err)
		}
		lr.Pages++
		if len(items) > 0 {
			if err := r.checkListed(ctx, s, terminal, items, listedAt, rep); err != nil {
				return r.interrupted(ctx, s, lr, after, err)
			}
		}
		if !more || len(items) == 0 {
			lr.Complete = true
			return saveComplete(ctx, r.pool, s.Name(), listing, nil)
		}
		after = items[len(items)-1].ID
		if err := saveProgress(ctx, r.pool, s.Name(), listing, after, nil); err != nil {
			return err
		}
	}
}

// interrupted records where a walk stopped and why, and returns the error.
func (r *Reconciler) interrupted(ctx context.Context, s provider.Source, lr *ListingReport, cursor string, err error) error {
	lr.Error = err.Error()
	if serr := saveProgress(ctx, r.pool, s.Name(), lr.Listing, cursor, err); serr != nil {
		return fmt.Errorf("%w; %w", err, serr)
	}
	return err
}

// eventWalk is the cursor of an events walk in progress: the lower bound it
// started with (kept across an interruption, so the walk resumes the same
// listing), where it stands, and the newest event time it saw.
type eventWalk struct {
	Since  time.Time `json:"since"`
	Cursor string    `json:"cursor,omitempty"`
	Newest time.Time `json:"newest,omitzero"`
}

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
	for _, ep := range append([]*provider.Endpoint{s.Endpoint}, s.Endpoints...) {
		if ep.Provider != s.Provider || ep.SourceAccount != s.SourceAccount || ep.Environment != s.Environment {
			// Events are stored under the endpoint's identity; a source that
			// names another would read one account and file it as another.
			lr.Error = fmt.Sprintf("endpoint %q is %s/%s/%s, not the source's", ep.ID, ep.Provider, ep.SourceAccount, ep.Environment)
			return fmt.Errorf("scan %s events: %s", s.Name(), lr.Error)
		}
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

// redeliverLost walks the hook's deliveries back to the checkpoint's high
// water minus the overlap and follows each event none of whose deliveries
// got a 2xx and that the inbox does not hold; then it asks for the
// followed ones that are due (followRedeliveries), whether or not they are
// still inside the walk's window. The walk itself never asks, so a
// redelivery GitHub refuses cannot hold it at one cursor.
//
// Following needs the hook to have been listed this round: GitHub answers
// 404 on every call for a hook the token can no longer see, and a 404 on
// a redelivery would then give up every followed delivery.
func (r *Reconciler) redeliverLost(ctx context.Context, s provider.Source, rep *SourceReport) error {
	listed, werr := r.walkDeliveries(ctx, s, rep)
	if !listed {
		return werr
	}
	return errors.Join(werr, r.followRedeliveries(ctx, s, rep))
}

// walkDeliveries walks the deliveries and says whether at least one page
// was listed.
func (r *Reconciler) walkDeliveries(ctx context.Context, s provider.Source, rep *SourceReport) (bool, error) {
	lr := rep.listing(ListingDeliveries)
	cp, err := LoadCheckpoint(ctx, r.pool, s.Name(), ListingDeliveries)
	if err != nil {
		return false, err
	}
	var w eventWalk
	if cp.Cursor != "" {
		if err := json.Unmarshal([]byte(cp.Cursor), &w); err != nil {
			w = eventWalk{}
		}
		lr.ResumedAt = w.Cursor
	}
	if w.Since.IsZero() {
		w.Since = r.walkStart(cp.HighWater)
	}
	// Deliveries come newest first, so a redelivery that succeeded is seen
	// before the failed attempt it repaired.
	arrived := map[string]bool{}
	restarted := false
	for {
		ds, next, err := s.Hooks.ListDeliveries(ctx, w.Cursor, r.cfg.PageSize)
		if err != nil && w.Cursor != "" && !restarted && errors.Is(err, provider.ErrCursorGone) {
			r.log.WarnContext(ctx, "deliveries cursor no longer known to the provider; walking again from the newest",
				"source", s.Name(), "since", w.Since, "error", err.Error())
			restarted, w.Cursor = true, ""
			continue
		}
		if err != nil {
			err = fmt.Errorf("list %s hook deliveries for %s/%s: %w", s.Provider, s.SourceAccount, s.Environment, err)
			return lr.Pages > 0, r.interrupted(ctx, s, lr, mustJSON(w), err)
		}
		lr.Pages++
		done := next == "" || len(ds) == 0
		for _, d := range ds {
			if d.DeliveredAt.Before(w.Since) {
				done = true // older than the walk reaches: the rest were walked before
				break
			}
			if d.DeliveredAt.After(w.Newest) {
				w.Newest = d.DeliveredAt
			}
			if d.OK() {
				arrived[d.GUID] = true
				continue
			}
			if arrived[d.GUID] {
				continue
			}
			if err := r.recordFailed(ctx, s, d); err != nil {
				return true, r.interrupted(ctx, s, lr, mustJSON(w), err)
			}
			arrived[d.GUID] = true // the newest failed attempt is the one followed
		}
		if done {
			lr.Complete = true
			var hw *time.Time
			if !w.Newest.IsZero() {
				hw = &w.Newest
			}
			return true, saveComplete(ctx, r.pool, s.Name(), ListingDeliveries, hw)
		}
		w.Cursor = next
		if err := saveProgress(ctx, r.pool, s.Name(), ListingDeliveries, mustJSON(w), nil); err != nil {
			return true, err
		}
	}
}

// walkStart is where a walk with no cursor of its own starts: Overlap
// before the last complete walk's newest event, or, on a source's first
// walk, Backfill (at least Overlap) before now.
func (r *Reconciler) walkStart(highWater *time.Time) time.Time {
	if highWater != nil {
		return highWater.Add(-r.cfg.Overlap)
	}
	return r.now().Add(-max(r.cfg.Backfill, r.cfg.Overlap))
}
