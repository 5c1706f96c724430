package reconciler

import (
	"context"
	"fmt"

	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Divergence kinds, as reconcile_divergence and
// hookyard_reconciler_divergences_total name them.
const (
	// KindMissing: the provider lists a resource that has no projection.
	KindMissing = "missing"
	// KindStatus: the provider lists another status than the projection's.
	KindStatus = "status"
	// KindCancelAtPeriodEnd: the provider says the resource ends (or no
	// longer ends) at its period's end, the projection says otherwise.
	KindCancelAtPeriodEnd = "cancel_at_period_end"
	// KindDeleted: one side says deleted, the other does not.
	KindDeleted = "deleted"
	// KindParked: a projection was parked (version gap, conflict, unordered).
	KindParked = "parked"
)

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
	for {
		items, more, err := s.Lister.ListObjects(ctx, s.APIAccount, s.ResourceType, after, r.cfg.PageSize)
		if err != nil {
			err = fmt.Errorf("list %s %s for %s/%s: %w", s.Provider, s.ResourceType, s.SourceAccount, s.Environment, err)
			return r.interrupted(ctx, s, lr, after, err)
		}
		lr.Pages++
		if len(items) > 0 {
			if err := r.checkListed(ctx, s, terminal, items, rep); err != nil {
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

func (r *Reconciler) checkListed(ctx context.Context, s provider.Source, terminal []string, items []provider.Listed, rep *SourceReport) error {
	listed := make([]projection.Listed, len(items))
	for i, it := range items {
		listed[i] = projection.Listed{ID: it.ID, Status: it.Status, CancelAtPeriodEnd: it.CancelAtPeriodEnd, Deleted: it.Deleted}
	}
	checked, kinds, err := projection.EnqueueListed(ctx, r.pool, r.scope(s, terminal), listed)
	if err != nil {
		return err
	}
	rep.Checks += checked
	r.enqueued.WithLabelValues("listed").Add(float64(checked))
	for kind, n := range kinds {
		rep.Divergences += n
		r.divergences.WithLabelValues(s.Provider, kind).Add(float64(n))
	}
	return nil
}
