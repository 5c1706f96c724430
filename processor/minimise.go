package processor

import (
	"github.com/hookyard/hookyard/pkg/provider"
)

// minimise keeps of plan's states and facts only the fields their
// declarations name (Config.Facts, Config.StateFields): what is not needed
// for a decision or a recovery is never written (invariant 15). It runs on
// every interpretation of the event, retries and replays included, and
// keeps the same fields each time, so a versioned duplicate still compares
// equal.
func (p *Processor) minimise(providerName string, plan provider.Plan) provider.Plan {
	if s := plan.Snapshot; s != nil {
		cp := *s
		cp.State = p.keepState(s.State)
		plan.Snapshot = &cp
	}
	if len(plan.Facts) > 0 {
		facts := make([]provider.Fact, len(plan.Facts))
		for i, f := range plan.Facts {
			f.Data = keepOrEmpty(f.Data, p.cfg.Facts.Fields(providerName, f.Type))
			facts[i] = f
		}
		plan.Facts = facts
	}
	return plan
}

// keepState is a resource state with only the fields a projection keeps.
func (p *Processor) keepState(state []byte) []byte {
	kept, err := p.stateKeeper.Keep(state)
	if err != nil {
		return []byte("{}")
	}
	return kept
}

// keepOrEmpty is provider.Keep, or {} for a document it cannot read: a
// document that is not JSON keeps nothing rather than everything.
func keepOrEmpty(doc []byte, fields []string) []byte {
	kept, err := provider.Keep(doc, fields)
	if err != nil {
		return []byte("{}")
	}
	return kept
}
