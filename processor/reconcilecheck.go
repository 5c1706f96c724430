package processor

import (
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// fetchPlan is how a batch reads one resource it must fetch.
type fetchPlan struct {
	// background: every message asking for it is the reconciler's, so the
	// call spends only the background share of the quota
	// (provider.Background) and never the live one live hints need.
	background bool
	// listed is the newest state a reconcile listing carried for it, used
	// instead of a provider call when background.
	listed *message.Listed
}

// fetchPlans decides, per resource key, whether the batch's fetch of it is
// background work and whether a listing already carries its state. A live
// hint for the same resource in the batch makes it a live fetch: its
// result is newer than any listing and must not wait on the smaller bucket.
func fetchPlans(steps []*step) map[string]*fetchPlan {
	out := map[string]*fetchPlan{}
	for _, st := range steps {
		if st.err != nil || !st.plan.Fetch {
			continue
		}
		key := st.msg.Resource.Key()
		p := out[key]
		reconcile := st.msg.Kind == message.KindCheck && st.msg.Reason == message.ReasonReconcile
		if p == nil {
			p = &fetchPlan{background: reconcile}
			out[key] = p
		}
		if !reconcile {
			p.background, p.listed = false, nil
			continue
		}
		if p.background && st.msg.Listed != nil && (p.listed == nil || st.msg.Listed.Seq > p.listed.Seq) {
			p.listed = st.msg.Listed
		}
	}
	return out
}

// listedFetched is a listing's state as the fetch it stands for.
func listedFetched(l *message.Listed) provider.Fetched {
	return provider.Fetched{State: l.State, Status: l.Status, Deleted: l.Deleted}
}
