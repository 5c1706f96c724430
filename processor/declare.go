package processor

import (
	facts "github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/registry"
)

// declare adds to plan the facts the declarations (Config.Facts) find in
// ev and, for each, an action of every effect declared on its type
// (Config.Effects' on_fact), keyed by the fact's identity: (account, fact
// id, kind). Providers code no fact; they only say where an event's object
// is (registry.FactObject). Like an Interpreter, it is a pure function of
// the event and the config, so a retry or replay records the same fact and
// action, which are already there.
func (p *Processor) declare(providerName string, ev provider.StoredEvent, plan provider.Plan) (provider.Plan, error) {
	found, err := p.cfg.Facts.Extract(providerName, ev, registry.FactObject(providerName, ev))
	if err != nil {
		return provider.Plan{}, err
	}
	for _, f := range found {
		plan.Facts = append(plan.Facts, f)
		for _, kind := range p.cfg.Effects.OnFact(providerName, f.Type) {
			plan.Actions = append(plan.Actions, provider.Action{Subject: f.ID, Kind: kind})
		}
	}
	return plan, nil
}

// factRecord is the fact row of f, found in m's event: about the resource
// its declaration links, or else the event's.
func factRecord(m message.Message, f provider.Fact) facts.Fact {
	rt, rid := m.Type, m.ID
	if f.ResourceID != "" {
		rt, rid = f.ResourceType, f.ResourceID
	}
	return facts.Fact{Provider: m.Provider, SourceAccount: m.SourceAccount, Environment: m.Environment,
		Type: f.Type, ID: f.ID, ResourceType: rt, ResourceID: rid, EventID: m.EventID, Data: f.Data}
}
