package processor

import (
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
)

// fetchPlan is how a batch reads one resource it must fetch.
type fetchPlan struct {
	// background: every message asking for it is the reconciler's, so the
	// call spends only the background share of the quota
	// (provider.Background) and never the live one live hints need.
	background bool
	// listedSeq names the newest state a reconcile listing kept for it
	// (reconcile_listed), used instead of a provider call when background;
	// 0 when none.
	listedSeq int64
}

// fetchPlans decides, per resource key, whether the batch's fetch of it is
// background work and whether a listing already holds its state. A live
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
			p.background, p.listedSeq = false, 0
			continue
		}
		if p.background && st.msg.ListedSeq > p.listedSeq {
			p.listedSeq = st.msg.ListedSeq
		}
	}
	return out
}

// listedKey is the identity of the listed state a check names; ok is
// false when it names none.
func listedKey(m message.Message) (k projection.ListedKey, ok bool) {
	if m.Kind != message.KindCheck || m.ListedSeq <= 0 {
		return k, false
	}
	return projection.ListedKey{Resource: m.Resource, Seq: m.ListedSeq}, true
}

// listedFetched is a listing's state as the fetch it stands for.
func listedFetched(l projection.ListedState) provider.Fetched {
	return provider.Fetched{State: l.State, Status: l.Status, Deleted: l.Deleted}
}
