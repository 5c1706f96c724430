package projection

import "slices"

// DecisionFields are the fields of a resource's state that a decision
// reads: pkg/access (status, cancel_at_period_end, the period's end in
// its three places), the reconciler's compare with a listing
// (cancel_at_period_end) and the provider's own identity and deletion
// marks. A projection keeps these and the configured
// projection.state_fields, nothing else: a customer's e-mail, name or
// address a provider put in the object is never stored (invariant 15).
// Whoever adds a decision on another field adds the field here.
//
// The customer's id (customer, customer_id) is kept as an identity, not a
// decision's input: it is what links a resource to the person an erasure
// request names.
var DecisionFields = []string{
	"id", "object", "customer", "customer_id", "status", "deleted", "resource_version",
	"cancel_at_period_end", "cancel_at", "canceled_at", "ended_at",
	"current_period_start", "current_period_end", "current_term_start", "current_term_end",
	"items.data.current_period_end",
	"trial_end",
}

// KeptFields are the fields of a state a projection keeps with extra, the
// configured projection.state_fields.
func KeptFields(extra []string) []string {
	return append(slices.Clip(DecisionFields), extra...)
}
