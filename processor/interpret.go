package processor

import (
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/registry"
)

// interpret reads an inbox row into a plan with its provider's
// Interpreter, then adds the declared facts the event carries and the
// effects declared on them (declare). Provider, account and environment
// are the row's, which came from the endpoint. A provider no adapter
// handles asks for nothing: the event is recorded. Every identity the plan
// read from the body is checked here, whichever interpreter made it: an
// unstorable one is malformed.
func (p *Processor) interpret(row *inboxRow, ep *provider.Endpoint) (provider.Plan, error) {
	in := registry.Interpreter(row.provider)
	if in == nil {
		return provider.Plan{}, nil
	}
	ev := provider.StoredEvent{EventType: row.eventType, ResourceType: row.resourceType,
		ResourceID: row.resourceID, Version: row.version, Payload: row.payload}
	plan, err := in.Interpret(ev, ep)
	if err != nil {
		return plan, err
	}
	if plan, err = p.declare(row.provider, ev, plan); err != nil {
		return provider.Plan{}, err
	}
	if err := plan.Validate(); err != nil {
		return provider.Plan{}, err
	}
	return plan, nil
}
