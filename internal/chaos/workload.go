package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// Providers the workload plays.
const (
	stripeProv    = "stripe"
	chargebeeProv = "chargebee"
)

// step is one change of a subscription in the provider, and the event the
// provider sends about it.
type step struct {
	at        time.Duration // from the start of the traffic
	eventType string
	status    string
	// cancelAtPeriodEnd is Stripe's flag; Chargebee says non_renewing.
	cancelAtPeriodEnd bool
	// invoice is the id of an invoice paid in this step ("" for none).
	invoice string
}

// sub is one subscription's lifecycle.
type sub struct {
	prov  string
	id    string
	steps []step
	// terminalCancel: the lifecycle ends with an immediate cancellation and
	// nothing after it, so access closed by it must never open again.
	terminalCancel bool
}

// event is one step's event and how it is delivered.
type event struct {
	sub, step int
	id        string
	// offsets are the delivery times after the step, one per copy; none
	// when the event is dropped for good.
	offsets []time.Duration
}

// fault is one scheduled fault.
type fault struct {
	at     time.Duration
	kind   string
	target int // processor or relay index
	hold   time.Duration
}

// Fault kinds.
const (
	faultKillProcessor   = "kill -9 processor"
	faultPauseProcessor  = "SIGSTOP processor"
	faultKillRelay       = "kill -9 relay"
	faultTerminatePG     = "terminate postgres backends"
	faultMoveLeaders     = "move partition leaders"
	faultMoveCoordinator = "move group coordinators"
)

// plan is everything the seed decides.
type plan struct {
	subs   []sub
	events []event
	faults []fault
	// dropped counts events dropped for good, duplicated those delivered
	// more than once, concurrent those with two copies sent at once.
	dropped, duplicated, concurrent int
	// droppedFinal counts Stripe cancellations whose every delivery was
	// dropped: only the reconciler's listing can find them.
	droppedFinal int
}

// planConfig sizes a plan.
type planConfig struct {
	seed          int64
	subscriptions int
	events        int
	traffic       time.Duration
	maxDelay      time.Duration
	processors    int
	relays        int
	sessionPause  time.Duration
	brokerFaults  bool
	faults        bool
}

// newPlan derives the lifecycles, the delivery schedule and the faults from
// the seed alone.
func newPlan(c planConfig) plan {
	rng := rand.New(rand.NewPCG(uint64(c.seed), 0x6f6b7961726421))
	var p plan
	perSub := max(2, c.events/max(1, c.subscriptions))
	for i := range c.subscriptions {
		s := sub{prov: stripeProv, id: fmt.Sprintf("sub_chaos_%d_%d", c.seed, i)}
		if i%2 == 1 {
			s.prov, s.id = chargebeeProv, fmt.Sprintf("cb_chaos_%d_%d", c.seed, i)
		}
		s.steps = lifecycle(rng, s.prov, s.id, perSub)
		// Spread the steps over the traffic window, in order.
		start := time.Duration(rng.Int64N(int64(c.traffic) / 3))
		times := make([]time.Duration, len(s.steps))
		for j := range times {
			times[j] = start + time.Duration(rng.Int64N(int64(c.traffic-start)))
		}
		slices.Sort(times)
		for j := range s.steps {
			s.steps[j].at = times[j]
		}
		last := s.steps[len(s.steps)-1]
		s.terminalCancel = last.status == "canceled" || last.status == "cancelled"
		p.subs = append(p.subs, s)
	}
	n := 0
	for si, s := range p.subs {
		for j, st := range s.steps {
			n++
			e := event{sub: si, step: j, id: fmt.Sprintf("evt_chaos_%d_%d", c.seed, n)}
			if s.prov == chargebeeProv {
				e.id = fmt.Sprintf("ev_chaos_%d_%d", c.seed, n)
			}
			final := j == len(s.steps)-1
			// Dropped for good, left to the reconciler: for Stripe any
			// subscription event but a final one that is not a
			// cancellation (the reconciler's listing finds a status that
			// differs; a flag it cannot see); for Chargebee, whose events
			// scan is not there yet, only non-final ones. Invoice events
			// are never dropped: no reconciler lists invoices.
			droppable := st.invoice == "" && (!final || (s.prov == stripeProv && s.terminalCancel))
			if droppable && rng.Float64() < 0.04 {
				p.dropped++
				if final {
					p.droppedFinal++
				}
				p.events = append(p.events, e)
				continue
			}
			delay := time.Duration(rng.Int64N(int64(c.maxDelay)))
			if rng.Float64() < 0.1 {
				delay *= 5 // a late delivery overtaken by later events
			}
			e.offsets = []time.Duration{delay}
			if rng.Float64() < 0.12 {
				p.duplicated++
				copies := 1 + rng.IntN(2)
				for range copies {
					if rng.Float64() < 0.5 {
						e.offsets = append(e.offsets, delay) // sent at the same time
						p.concurrent++
					} else {
						e.offsets = append(e.offsets, delay+time.Duration(rng.Int64N(int64(c.maxDelay)*3)))
					}
				}
			}
			p.events = append(p.events, e)
		}
	}
	if c.faults {
		p.faults = faultSchedule(rng, c)
	}
	return p
}

// faultSchedule puts one processor fault (kill or pause) in each slot of the
// traffic window, so at most one processor is down at a time, and the other
// faults between them.
func faultSchedule(rng *rand.Rand, c planConfig) []fault {
	var fs []fault
	slot := c.sessionPause + 6*time.Second
	i := 0
	for at := 5 * time.Second; at < c.traffic; at += slot {
		kind, hold := faultKillProcessor, time.Duration(2+rng.IntN(3))*time.Second
		if i%3 == 1 {
			kind, hold = faultPauseProcessor, c.sessionPause
		}
		fs = append(fs, fault{at: at, kind: kind, target: rng.IntN(c.processors), hold: hold})
		mid := at + slot/2
		switch i % 3 {
		case 0:
			fs = append(fs, fault{at: mid, kind: faultKillRelay, target: rng.IntN(c.relays), hold: time.Second})
		case 1:
			fs = append(fs, fault{at: mid, kind: faultTerminatePG})
		case 2:
			if c.brokerFaults {
				kind := faultMoveLeaders
				if (i/3)%2 == 1 {
					kind = faultMoveCoordinator
				}
				fs = append(fs, fault{at: mid, kind: kind})
			} else {
				fs = append(fs, fault{at: mid, kind: faultTerminatePG})
			}
		}
		i++
	}
	return fs
}

// lifecycle plays a subscription from creation: trial or not, payments,
// plan changes, payment trouble, cancel at period end and its removal, and
// an end (cancel now, cancel at period end, or still running). Chargebee
// subscriptions may also be reactivated after a cancellation.
func lifecycle(rng *rand.Rand, prov, id string, budget int) []step {
	stripe := prov == stripeProv
	name := func(stripeType, cbType string) string {
		if stripe {
			return stripeType
		}
		return cbType
	}
	active, trial, canceled, pastDue := "active", "trialing", "canceled", "past_due"
	if !stripe {
		trial, canceled = "in_trial", "cancelled"
	}
	var steps []step
	cur := step{status: active}
	if rng.IntN(3) == 0 {
		cur.status = trial
	}
	inv := 0
	add := func(typ string, mutate func(*step)) {
		s := cur
		s.eventType, s.invoice = typ, ""
		mutate(&s)
		steps = append(steps, s)
		cur = s
	}
	pay := func() {
		inv++
		invID := fmt.Sprintf("in_%s_%d", id, inv)
		add(name("invoice.paid", "payment_succeeded"), func(s *step) { s.invoice = invID })
	}
	add(name("customer.subscription.created", "subscription_created"), func(*step) {})
	if cur.status == trial {
		add(name("customer.subscription.updated", "subscription_started"), func(s *step) { s.status = active })
	}
	pay()
	for len(steps) < budget-1 {
		switch r := rng.IntN(10); {
		case r < 4:
			pay()
		case r < 6:
			add(name("customer.subscription.updated", "subscription_changed"), func(*step) {}) // plan change
		case r < 7 && stripe:
			add("customer.subscription.updated", func(s *step) { s.status = pastDue })
			pay()
			add("customer.subscription.updated", func(s *step) { s.status = active })
		case r < 8:
			if stripe {
				add("customer.subscription.updated", func(s *step) { s.cancelAtPeriodEnd = true })
				add("customer.subscription.updated", func(s *step) { s.cancelAtPeriodEnd = false }) // reactivated
			} else {
				add("subscription_cancellation_scheduled", func(s *step) { s.status = "non_renewing" })
				add("subscription_scheduled_cancellation_removed", func(s *step) { s.status = active })
			}
		case r < 9 && !stripe:
			add("subscription_cancelled", func(s *step) { s.status = canceled })
			add("subscription_reactivated", func(s *step) { s.status = active })
		default:
			add(name("customer.subscription.updated", "subscription_changed"), func(*step) {})
		}
	}
	switch r := rng.IntN(4); {
	case r < 2:
		add(name("customer.subscription.deleted", "subscription_cancelled"), func(s *step) { s.status, s.cancelAtPeriodEnd = canceled, false })
	case r < 3:
		if stripe {
			add("customer.subscription.updated", func(s *step) { s.cancelAtPeriodEnd = true })
		} else {
			add("subscription_cancellation_scheduled", func(s *step) { s.status = "non_renewing" })
		}
	default:
		pay()
	}
	return steps
}

// digest is a short fingerprint of the plan: equal seeds give equal digests.
func (p plan) digest() string {
	h := uint64(14695981039346656037)
	mix := func(s string) {
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
	}
	for _, e := range p.events {
		s := p.subs[e.sub].steps[e.step]
		mix(fmt.Sprint(e.id, s.at, s.eventType, s.status, s.invoice, e.offsets))
	}
	for _, f := range p.faults {
		mix(fmt.Sprint(f))
	}
	return fmt.Sprintf("%016x", h)
}
