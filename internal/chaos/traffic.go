package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// action is one thing the traffic does at its time: a provider-side change
// (mutate) or one delivery of an event.
type action struct {
	at     time.Duration
	mutate bool
	event  int
	copy   int
}

// traffic plays the plan against the running system.
type traffic struct {
	s    *system
	p    plan
	http *http.Client

	mu sync.Mutex
	// bodies are the events' bodies, built at their step.
	bodies map[int][]byte
	// cbVersion is each Chargebee subscription's last resource_version.
	cbVersion map[int]int64
	// truthVersion is the version of each Chargebee subscription's last step.
	truthVersion map[int]int64
	// acked are the event ids some delivery of which got a 2xx.
	acked   map[string]bool
	answers map[string]int
	// deliveries counts HTTP attempts, retries those answered other than 2xx.
	deliveries, retries int
}

func newTraffic(s *system, p plan) *traffic {
	return &traffic{s: s, p: p, http: &http.Client{Timeout: 15 * time.Second},
		bodies: map[int][]byte{}, cbVersion: map[int]int64{}, truthVersion: map[int]int64{},
		acked: map[string]bool{}, answers: map[string]int{}}
}

func (t *traffic) actions() []action {
	var as []action
	for i, e := range t.p.events {
		at := t.p.subs[e.sub].steps[e.step].at
		as = append(as, action{at: at, mutate: true, event: i})
		for c, off := range e.offsets {
			as = append(as, action{at: at + off, event: i, copy: c})
		}
	}
	// Stable, and a change always before the deliveries of its event.
	slices.SortStableFunc(as, func(a, b action) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		if a.mutate != b.mutate {
			if a.mutate {
				return -1
			}
			return 1
		}
		return 0
	})
	return as
}

// run plays every action at its time; deliveries go through workers, so
// copies due at once race each other to the receiver.
func (t *traffic) run(ctx context.Context, workers int) {
	jobs := make(chan int, 4096)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t.deliver(ctx, i)
			}
		}()
	}
	start := time.Now()
	for _, a := range t.actions() {
		if d := time.Until(start.Add(a.at)); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		if ctx.Err() != nil {
			break
		}
		if a.mutate {
			t.mutate(a.event)
			continue
		}
		jobs <- a.event
	}
	close(jobs)
	wg.Wait()
}

// mutate applies a step in the provider and builds its event.
func (t *traffic) mutate(i int) {
	e := t.p.events[i]
	s := t.p.subs[e.sub]
	st := s.steps[e.step]
	now := time.Now()
	var body []byte
	if s.prov == stripeProv {
		sub := stripeSub(s.id, st, now)
		t.s.sim.Put(sub)
		obj := any(sub)
		if st.invoice != "" {
			inv := stripesim.Invoice{ID: st.invoice, Object: "invoice", Customer: sub.Customer, Subscription: s.id,
				Status: "paid", AmountPaid: 1900, Currency: "usd", Created: now.Unix()}
			inv.Parent.SubscriptionDetails.Subscription = s.id
			obj = inv
		}
		body = mustJSON(map[string]any{"id": e.id, "object": "event", "api_version": stripesim.APIVersion,
			"created": now.Unix(), "livemode": false, "type": st.eventType, "data": map[string]any{"object": obj}})
	} else {
		t.mu.Lock()
		// resource_version is the change's time in milliseconds, growing
		// per subscription (https://apidocs.chargebee.com/docs/api/subscriptions#subscription_attributes).
		v := max(now.UnixMilli(), t.cbVersion[e.sub]+1)
		t.cbVersion[e.sub] = v
		if e.step == len(s.steps)-1 {
			t.truthVersion[e.sub] = v
		}
		t.mu.Unlock()
		content := map[string]any{"subscription": map[string]any{"id": s.id, "object": "subscription",
			"customer_id": "cus_" + s.id, "status": st.status, "resource_version": v,
			"current_term_end": now.Add(30 * 24 * time.Hour).Unix(), "plan_id": "basic"}}
		if st.invoice != "" {
			content["invoice"] = map[string]any{"id": st.invoice, "object": "invoice", "subscription_id": s.id,
				"status": "paid", "amount_paid": 1900, "resource_version": v}
		}
		body = mustJSON(map[string]any{"id": e.id, "object": "event", "event_type": st.eventType,
			"occurred_at": now.Unix(), "api_version": "v2", "content": content})
	}
	t.mu.Lock()
	t.bodies[i] = body
	t.mu.Unlock()
}

func stripeSub(id string, st step, now time.Time) stripesim.Subscription {
	periodEnd := now.Add(30 * 24 * time.Hour).Unix()
	sub := stripesim.Subscription{ID: id, Object: "subscription", Customer: "cus_" + id, Status: st.status,
		CancelAtPeriodEnd: st.cancelAtPeriodEnd, CurrentPeriodStart: now.Unix(), CurrentPeriodEnd: periodEnd,
		Created: now.Unix(), Items: stripesim.Items{Object: "list", Data: []stripesim.Item{{ID: "si_" + id,
			Object: "subscription_item", CurrentPeriodStart: now.Unix(), CurrentPeriodEnd: periodEnd}}}}
	if st.status == "canceled" {
		sub.CanceledAt = now.Unix()
	}
	return sub
}

// deliver sends one copy until some answer is a 2xx, as providers retry.
func (t *traffic) deliver(ctx context.Context, i int) {
	e := t.p.events[i]
	s := t.p.subs[e.sub]
	t.mu.Lock()
	body := t.bodies[i]
	t.mu.Unlock()
	endpoint := stripeEndpoint
	if s.prov == chargebeeProv {
		endpoint = cbEndpoint
	}
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, t.s.receiverURL+"/webhooks/"+endpoint, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if s.prov == stripeProv {
			req.Header.Set("Stripe-Signature", stripe.Sign(body, t.s.stripeSecret, time.Now()))
		} else {
			req.SetBasicAuth(t.s.cbUser, t.s.cbPass)
		}
		resp, err := t.http.Do(req)
		var answer struct {
			Status string `json:"status"`
		}
		code := 0
		if err == nil {
			code = resp.StatusCode
			_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&answer)
			resp.Body.Close()
		}
		t.mu.Lock()
		t.deliveries++
		if code/100 == 2 {
			t.acked[e.id] = true
			t.answers[answer.Status]++
			t.mu.Unlock()
			return
		}
		t.retries++
		t.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 3*time.Second)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("chaos: marshal: %v", err)) // the harness's own maps: a bug here
	}
	return b
}

// sample is one access answer.
type sample struct {
	at     time.Time
	sub    int
	access bool
	status string
	reason string
	// version is the decision's provider version (Chargebee's
	// resource_version), which tells the final cancellation from an earlier
	// one that a reactivation undid.
	version *int64
}

// sampler asks the access API about random subscriptions while the system
// runs.
type sampler struct {
	s    *system
	p    plan
	http *http.Client
	mu   sync.Mutex
	all  []sample
	errs int
}

func (sm *sampler) run(ctx context.Context, every time.Duration, seed int64) {
	rng := rand.New(rand.NewPCG(uint64(seed), 17))
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		i := rng.IntN(len(sm.p.subs))
		d, err := sm.s.access(ctx, sm.p.subs[i])
		sm.mu.Lock()
		if err != nil {
			sm.errs++ // 404 before the first event, an ops API restart: not a decision
		} else {
			sm.all = append(sm.all, sample{at: time.Now(), sub: i, access: d.Access, status: d.Status, reason: d.Reason, version: d.ProviderVersion})
		}
		sm.mu.Unlock()
	}
}
