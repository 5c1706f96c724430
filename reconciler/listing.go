package reconciler

import (
	"context"

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
	// KindState: a listed object without a status (a customer) whose
	// kept fields (the decision fields and the processor's state_fields)
	// differ from the projection's, deletion alike: it changed.
	KindState = "state"
	// KindParked: a projection was parked (version gap, conflict, unordered).
	KindParked = "parked"
)

// checkListed compares a page with the projections and sends a check for
// each diverged resource; a check names the listed state, kept in
// reconcile_listed, when the listing has it (listedAt, the database clock
// and fetch number before the page was asked for, dates it), so the
// processor writes it without a provider call.
func (r *Reconciler) checkListed(ctx context.Context, s provider.Source, terminal []string, items []provider.Listed, listedAt projection.FetchStart, rep *SourceReport) error {
	listed := make([]projection.Listed, len(items))
	for i, it := range items {
		listed[i] = projection.Listed{ID: it.ID, Status: it.Status, CancelAtPeriodEnd: it.CancelAtPeriodEnd, Deleted: it.Deleted}
		if it.State != nil {
			// Kept as the projection keeps it: reconcile_listed holds no
			// customer data the projection would drop. A state that is
			// not JSON is left to a fetch.
			if kept, err := provider.Keep(it.State, r.cfg.StateFields); err == nil {
				listed[i].State = kept
			}
		}
	}
	checked, kinds, err := projection.EnqueueListed(ctx, r.pool, r.scope(s, terminal), listed, listedAt)
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
