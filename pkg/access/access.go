// Package access turns a projection into a product decision: may this
// subscription's customer use the product now? It reads only the projection;
// it never calls a provider and never writes.
package access

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/hookyard/hookyard/pkg/projection"
)

// Policy is the configurable part of the rules.
type Policy struct {
	// PastDue grants access to past_due subscriptions (the provider is still
	// retrying payment). Defaults to true.
	PastDue *bool `yaml:"past_due"`
	// Unpaid grants access to unpaid subscriptions (retries exhausted).
	// Defaults to false.
	Unpaid *bool `yaml:"unpaid"`
}

// Decision is the answer of GET /v1/access/...
type Decision struct {
	Access bool   `json:"access"`
	Reason string `json:"reason"`
	Status string `json:"status"`
	// Until is when access ends, when that is known (cancel at period end).
	Until *time.Time `json:"until,omitempty"`
	// ProviderVersion and ObservedAt tell which state the decision is from.
	ProviderVersion *int64    `json:"provider_version,omitempty"`
	ObservedAt      time.Time `json:"observed_at"`
}

type state struct {
	Status            string      `json:"status"`
	CancelAtPeriodEnd bool        `json:"cancel_at_period_end"`
	CurrentPeriodEnd  json.Number `json:"current_period_end"`
	CurrentTermEnd    json.Number `json:"current_term_end"` // Chargebee
	Items             struct {
		Data []struct {
			CurrentPeriodEnd json.Number `json:"current_period_end"`
		} `json:"data"`
	} `json:"items"`
}

// Decide applies the rules at time now:
//   - active, trialing (Chargebee: active, in_trial) → access;
//   - canceled immediately (status canceled/cancelled), deleted → no access;
//   - cancel at period end (Stripe cancel_at_period_end, Chargebee
//     non_renewing) → access until the period's end, none after; with no
//     period end known, access until the provider reports the
//     cancellation (reason cancel_at_period_end, no Until);
//   - past_due → Policy.PastDue; unpaid → Policy.Unpaid;
//   - anything else (incomplete, incomplete_expired, paused, future) → no access.
func Decide(p projection.Projection, pol Policy, now time.Time) Decision {
	d := Decision{Status: p.Status, ProviderVersion: p.Version, ObservedAt: p.ObservedAt}
	if p.Deleted {
		d.Reason = "deleted"
		return d
	}
	var s state
	_ = json.Unmarshal(p.State, &s)
	status := p.Status
	if status == "" {
		status = s.Status
	}
	d.Status = status
	end := periodEnd(s)
	switch status {
	case "active", "trialing", "in_trial", "non_renewing":
		if s.CancelAtPeriodEnd || status == "non_renewing" {
			d.Access, d.Reason = true, "cancel_at_period_end"
			if end == nil {
				// No period end known: the provider still calls it active
				// and the period is paid for, so access stays until the
				// provider reports the cancellation (it does when the
				// period ends); no Until tells the product the end is
				// unknown.
				return d
			}
			d.Until = end
			if !now.Before(*end) {
				d.Access, d.Reason = false, "period_ended"
			}
			return d
		}
		d.Access, d.Reason = true, status
	case "canceled", "cancelled":
		d.Reason = "canceled"
	case "past_due":
		d.Access, d.Reason = pol.PastDue == nil || *pol.PastDue, "past_due"
	case "unpaid":
		d.Access, d.Reason = pol.Unpaid != nil && *pol.Unpaid, "unpaid"
	default:
		d.Reason = status
		if d.Reason == "" {
			d.Reason = "unknown_status"
		}
	}
	return d
}

func periodEnd(s state) *time.Time {
	for _, n := range []json.Number{s.CurrentPeriodEnd, s.CurrentTermEnd} {
		if t := unix(n); t != nil {
			return t
		}
	}
	for _, it := range s.Items.Data {
		if t := unix(it.CurrentPeriodEnd); t != nil {
			return t
		}
	}
	return nil
}

func unix(n json.Number) *time.Time {
	if n == "" {
		return nil
	}
	v, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil || v <= 0 {
		return nil
	}
	t := time.Unix(v, 0).UTC()
	return &t
}
