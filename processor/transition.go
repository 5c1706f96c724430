package processor

import (
	"github.com/jackc/pgx/v5"

	actions "github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/projection"
)

// transitions are the actions of the effects declared on projection
// transitions (Config.Effects' on) that the batch's writes made: a write
// that was applied (versioned) or fetched and changed the resource's label
// (projection.Label: its status, or deleted) from what the write found to
// what an effect names. It reads each write's outcome and the state it
// found from the write statement's own result, in the batch's fenced
// transaction, so a write that was stale, a duplicate or refused records
// no effect, and a fenced-out worker's transaction records nothing.
//
// It must run before settle, which moves a fetched resource's Previous to
// what the batch wrote. Each action is keyed by the resource and the
// observation that caused it (version or fetch sequence number): a replay
// of the event finds the projection already there (no transition), and a
// reprocessing of the same observation finds its action recorded.
func (w *worker) transitions(steps []*step, fetched map[string]*fetchResult) []actions.Record {
	var declared []actions.Effect
	for _, e := range w.p.cfg.Effects {
		if e.On != nil {
			declared = append(declared, e)
		}
	}
	if len(declared) == 0 {
		return nil
	}
	var out []actions.Record
	seen := map[string]bool{}
	for _, st := range steps {
		if st.err != nil {
			continue
		}
		m := st.msg
		var previous, label string
		var cause actions.Cause
		switch {
		case st.plan.Snapshot != nil && st.res.Outcome == projection.Applied:
			s := st.plan.Snapshot
			v := s.Version
			previous, label, cause = st.res.Previous, projection.Label(s.Status, s.Deleted), actions.Cause{Version: &v}
		case st.plan.Fetch:
			fr := fetched[m.Resource.Key()]
			if fr == nil || fr.err != nil || fr.res.Outcome != projection.Fetched || seen[m.Resource.Key()] {
				continue
			}
			seen[m.Resource.Key()] = true
			previous, label, cause = fr.res.Previous, projection.Label(fr.f.Status, fr.f.Deleted), actions.Cause{FetchSeq: fr.start.Seq}
		default:
			continue
		}
		for _, e := range declared {
			if !e.On.Matches(m.Type, previous, label) {
				continue
			}
			k := actions.Key{Provider: m.Provider, SourceAccount: m.SourceAccount, Environment: m.Environment, Kind: e.Kind}
			out = append(out, actions.TransitionRecord(k, m.Type, m.ID, previous, label, cause, m.EventID, st.trace.parent()))
		}
	}
	return out
}

// queueTransitions queues the recording of the transitions' actions into
// b, for the batch's transaction.
func queueTransitions(b *pgx.Batch, recs []actions.Record) {
	for _, r := range recs {
		actions.QueueRecord(b, r)
	}
}
