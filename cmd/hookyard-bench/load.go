package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
)

// Identities of the receiver benchmark.
const (
	benchEndpoint = "stripe-bench"
	benchAccount  = "acct_bench"
	benchSecret   = "whsec_bench_0123456789abcdef"
	benchType     = "customer.subscription.updated"
	benchSubs     = 10_000
)

// stripeEventTemplate is a customer.subscription.updated event shaped like
// Stripe's (basil API version), about 1.3 KB compact. $EVT, $SUB and $TS are
// filled per request.
const stripeEventTemplate = `{"id":"$EVT","object":"event","api_version":"2025-03-31.basil","created":$TS,` +
	`"data":{"object":{"id":"$SUB","object":"subscription","application":null,"automatic_tax":{"enabled":false,"liability":null},` +
	`"billing_cycle_anchor":1735689600,"cancel_at":null,"cancel_at_period_end":false,"canceled_at":null,` +
	`"collection_method":"charge_automatically","created":1735689600,"currency":"usd","customer":"cus_RbEnchCust0mer1",` +
	`"default_payment_method":"pm_1QbEnchPaymentMeth0d","description":null,"discounts":[],"ended_at":null,` +
	`"items":{"object":"list","data":[{"id":"si_RbEnch1tem0001","object":"subscription_item","created":1735689600,` +
	`"current_period_end":1738368000,"current_period_start":1735689600,"metadata":{},"price":{"id":"price_1QbEnchPr1ce",` +
	`"object":"price","active":true,"currency":"usd","product":"prod_RbEnchProduct","recurring":{"interval":"month",` +
	`"interval_count":1,"usage_type":"licensed"},"type":"recurring","unit_amount":2900},"quantity":1,"subscription":"$SUB"}],` +
	`"has_more":false,"total_count":1,"url":"/v1/subscription_items?subscription=$SUB"},"latest_invoice":"in_1QbEnchInvoice01",` +
	`"livemode":false,"metadata":{"plan":"pro"},"start_date":1735689600,"status":"active","trial_end":null,"trial_start":null},` +
	`"previous_attributes":{"status":"past_due"}},"livemode":false,"pending_webhooks":1,` +
	`"request":{"id":null,"idempotency_key":null},"type":"customer.subscription.updated"}`

// templatePart is a literal followed by a placeholder ("" at the end).
type templatePart struct{ lit, field string }

var stripeEventParts = splitTemplate(stripeEventTemplate, "$EVT", "$SUB", "$TS")

func splitTemplate(s string, fields ...string) []templatePart {
	var parts []templatePart
	for {
		at, field := -1, ""
		for _, f := range fields {
			if i := strings.Index(s, f); i >= 0 && (at < 0 || i < at) {
				at, field = i, f
			}
		}
		if at < 0 {
			return append(parts, templatePart{lit: s})
		}
		parts = append(parts, templatePart{lit: s[:at], field: field})
		s = s[at+len(field):]
	}
}

// stripeEventBody fills the template without encoding/json: the generator
// must stay much cheaper than the receiver it loads.
func stripeEventBody(eventID, subID string, created int64) []byte {
	b := make([]byte, 0, len(stripeEventTemplate)+64)
	for _, p := range stripeEventParts {
		b = append(b, p.lit...)
		switch p.field {
		case "$EVT":
			b = append(b, eventID...)
		case "$SUB":
			b = append(b, subID...)
		case "$TS":
			b = strconv.AppendInt(b, created, 10)
		}
	}
	return b
}

// outboxMessageJSON is the outbox row the receiver writes for an event.
func outboxMessageJSON(eventID string) []byte {
	m := message.Message{Kind: message.KindEvent, Resource: message.Resource{Provider: "stripe", SourceAccount: benchAccount,
		Environment: "test", Type: "subscription", ID: "sub_bench"}, EventID: eventID, EventType: benchType,
		EndpointID: benchEndpoint, EnqueuedAt: time.Now().UTC(), Reason: message.ReasonWebhook}
	b, err := json.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("marshal outbox message: %v", err)) // a fixed struct: cannot fail
	}
	return b
}

// signedReq is one delivery ready to send: its body and its credential,
// sent in header (Stripe's signature header when empty).
type signedReq struct {
	body   []byte
	sig    string
	header string
}

func newSignedReq(eventID string, sub int, now time.Time) signedReq {
	body := stripeEventBody(eventID, "sub_"+strconv.Itoa(sub), now.Unix())
	return signedReq{body: body, sig: stripe.Sign(body, benchSecret, now)}
}

// generatorCost measures building and signing one delivery.
func generatorCost() time.Duration {
	const n = 3000
	now := time.Now()
	start := time.Now()
	for i := range n {
		_ = newSignedReq("evt_cost_"+strconv.Itoa(i), i%benchSubs, now)
	}
	return time.Since(start) / n
}

// source hands out deliveries: presigned ones from a pool while it lasts,
// then built and signed inline.
type source struct {
	prefix string
	pool   []signedReq
}

func (s *source) get(n int) signedReq {
	if n < len(s.pool) {
		return s.pool[n]
	}
	return newSignedReq(s.prefix+strconv.Itoa(n), n%benchSubs, time.Now())
}

func presign(prefix string, n int) []signedReq {
	out := make([]signedReq, n)
	now := time.Now()
	for i := range out {
		out[i] = newSignedReq(prefix+strconv.Itoa(i), i%benchSubs, now)
	}
	return out
}

// loadStats counts what the receiver answered.
type loadStats struct {
	accepted  int64 // 200 {"status":"accepted"}
	other2xx  int64 // 200 with another status (duplicate, ignored)
	statuses  map[int]int64
	transport int64 // no HTTP answer
	firstErr  string
	lat       []time.Duration // accepted deliveries only
	elapsed   time.Duration
	// sent and sendSpan are the open loop's dispatches: how many deliveries
	// were handed to a worker, and the time from the first to the last.
	sent     int64
	sendSpan time.Duration
}

func (s *loadStats) merge(o *loadStats) {
	s.accepted += o.accepted
	s.other2xx += o.other2xx
	s.transport += o.transport
	for k, v := range o.statuses {
		if s.statuses == nil {
			s.statuses = map[int]int64{}
		}
		s.statuses[k] += v
	}
	if s.firstErr == "" {
		s.firstErr = o.firstErr
	}
	s.lat = append(s.lat, o.lat...)
}

func (s *loadStats) errors() int64 {
	n := s.transport
	for _, v := range s.statuses {
		n += v
	}
	return n
}

func (s *loadStats) errorSummary() string {
	if s.errors() == 0 && s.other2xx == 0 {
		return "0"
	}
	var parts []string
	if s.other2xx > 0 {
		parts = append(parts, fmt.Sprintf("%d not accepted (duplicate/ignored)", s.other2xx))
	}
	codes := make([]int, 0, len(s.statuses))
	for c := range s.statuses {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d×HTTP %d", s.statuses[c], c))
	}
	if s.transport > 0 {
		parts = append(parts, fmt.Sprintf("%d transport (%s)", s.transport, s.firstErr))
	}
	return strings.Join(parts, ", ")
}

// percentile of sorted durations, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// loadClient keeps one connection per worker alive.
func loadClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns * 2,
			MaxIdleConnsPerHost: conns * 2,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}

var acceptedMarker = []byte(`"status":"accepted"`)

// post sends one delivery and records the answer in st.
func post(ctx context.Context, cl *http.Client, url string, r signedReq, st *loadStats) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(r.body))
	if err != nil {
		st.transport++
		st.firstErr = err.Error()
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(cmp.Or(r.header, stripe.SignatureHeader), r.sig)
	resp, err := cl.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			st.transport++
			if st.firstErr == "" {
				st.firstErr = err.Error()
			}
		}
		return false
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	switch {
	case err != nil:
		st.transport++
		if st.firstErr == "" {
			st.firstErr = err.Error()
		}
	case resp.StatusCode != http.StatusOK:
		if st.statuses == nil {
			st.statuses = map[int]int64{}
		}
		st.statuses[resp.StatusCode]++
		if st.firstErr == "" {
			st.firstErr = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
		}
	case bytes.Contains(body, acceptedMarker):
		st.accepted++
		return true
	default:
		st.other2xx++
	}
	return false
}

// closedLoop runs workers that each send their next delivery as soon as the
// previous one is answered, for d. A delivery in flight at the deadline is
// awaited and counted, so that accepted equals the rows committed; elapsed
// covers it too.
func closedLoop(ctx context.Context, cl *http.Client, url string, srcs []*source, d time.Duration) loadStats {
	start := time.Now()
	deadline := start.Add(d)
	stats := make([]loadStats, len(srcs))
	var wg sync.WaitGroup
	for w, src := range srcs {
		wg.Go(func() {
			st := &stats[w]
			for n := 0; time.Now().Before(deadline) && ctx.Err() == nil; n++ {
				t0 := time.Now()
				if post(ctx, cl, url, src.get(n), st) {
					st.lat = append(st.lat, time.Since(t0))
				}
			}
		})
	}
	wg.Wait()
	var total loadStats
	for i := range stats {
		total.merge(&stats[i])
	}
	total.elapsed = time.Since(start)
	slices.Sort(total.lat)
	return total
}

// openLoop sends rate deliveries per second for d, whatever the answers
// take: a ticker releases the deliveries that are due to a pool of workers,
// and each latency is measured from the delivery's scheduled time, so time
// spent queued behind a slow answer counts (no coordinated omission).
func openLoop(ctx context.Context, cl *http.Client, url string, get func(n int) signedReq, rate float64, d time.Duration, workers int) loadStats {
	total := int(rate * d.Seconds())
	type job struct {
		n     int
		sched time.Time
	}
	jobs := make(chan job, total)
	stats := make([]loadStats, workers)
	var wg sync.WaitGroup
	var lastDone atomic.Int64
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			st := &stats[w]
			for j := range jobs {
				if post(ctx, cl, url, get(j.n), st) {
					st.lat = append(st.lat, time.Since(j.sched))
				}
				lastDone.Store(int64(time.Since(start)))
			}
		})
	}
	interval := time.Duration(float64(time.Second) / rate)
	tick := time.NewTicker(time.Millisecond)
	next := 0
	var lastSent time.Duration
dispatch:
	for next < total {
		select {
		case <-ctx.Done():
			break dispatch
		case now := <-tick.C:
			for next < total {
				sched := start.Add(time.Duration(next) * interval)
				if sched.After(now) {
					break
				}
				jobs <- job{n: next, sched: sched}
				next++
				lastSent = time.Since(start)
			}
		}
	}
	tick.Stop()
	close(jobs)
	wg.Wait()
	var out loadStats
	for i := range stats {
		out.merge(&stats[i])
	}
	out.elapsed = time.Duration(lastDone.Load())
	out.sent, out.sendSpan = int64(next), lastSent
	slices.Sort(out.lat)
	return out
}
