package stripesim

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookyard/hookyard/pkg/provider/stripe"
)

// APIVersion is the api_version stamped on events.
const APIVersion = "2025-03-31.basil"

// Config configures a Sim.
type Config struct {
	// WebhookURL is where signed events are POSTed, e.g.
	// http://127.0.0.1:8080/webhooks/stripe-dev.
	WebhookURL string
	// WebhookSecret signs events (whsec_...).
	WebhookSecret string
	// Account is stamped as the events' "account" (Connect); "" sends
	// platform events without the field.
	Account string
	// Latency is added to each API response.
	Latency time.Duration
	// HTTPClient sends webhooks; nil uses a client with a 10s timeout.
	HTTPClient *http.Client
}

// Subscription is a Stripe subscription as the API returns it.
type Subscription struct {
	ID                 string `json:"id"`
	Object             string `json:"object"`
	Customer           string `json:"customer"`
	Status             string `json:"status"`
	CancelAtPeriodEnd  bool   `json:"cancel_at_period_end"`
	CurrentPeriodEnd   int64  `json:"current_period_end"`
	CurrentPeriodStart int64  `json:"current_period_start"`
	// CanceledAt is 0 while the subscription is not canceled.
	CanceledAt int64 `json:"canceled_at"`
	Created    int64 `json:"created"`
	Livemode   bool  `json:"livemode"`
	Items      Items `json:"items"`
}

// Items is a subscription's item list.
type Items struct {
	Object string `json:"object"`
	Data   []Item `json:"data"`
}

// Item is a subscription item; since the basil API version it carries the
// billing period.
type Item struct {
	ID                 string `json:"id"`
	Object             string `json:"object"`
	CurrentPeriodEnd   int64  `json:"current_period_end"`
	CurrentPeriodStart int64  `json:"current_period_start"`
}

// Invoice is the invoice object sent with invoice.paid.
type Invoice struct {
	ID           string `json:"id"`
	Object       string `json:"object"`
	Customer     string `json:"customer"`
	Subscription string `json:"subscription"`
	Status       string `json:"status"`
	AmountPaid   int64  `json:"amount_paid"`
	Currency     string `json:"currency"`
	Created      int64  `json:"created"`
	Livemode     bool   `json:"livemode"`
	Parent       struct {
		SubscriptionDetails struct {
			Subscription string `json:"subscription"`
		} `json:"subscription_details"`
	} `json:"parent"`
}

// Sim is the simulator. It is an http.Handler and safe for concurrent use.
type Sim struct {
	cfg      Config
	mux      *http.ServeMux
	apiCalls atomic.Int64

	mu      sync.Mutex
	subs    map[string]Subscription
	latency time.Duration
	failure int
}

// New returns an empty simulator.
func New(cfg Config) *Sim {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Sim{cfg: cfg, subs: map[string]Subscription{}, latency: cfg.Latency}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /v1/subscriptions/{id}", s.api(s.getSubscription))
	s.mux.HandleFunc("GET /v1/subscriptions", s.api(s.listSubscriptions))
	s.mux.HandleFunc("POST /sim/subscriptions", s.upsertSubscription)
	s.mux.HandleFunc("POST /sim/subscriptions/{id}/cancel", s.cancelSubscription)
	s.mux.HandleFunc("POST /sim/invoices/{id}/pay", s.payInvoice)
	s.mux.HandleFunc("GET /sim/stats", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"api_calls": s.APICalls()})
	})
	return s
}

// ServeHTTP serves the API and the control endpoints.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Put stores sub as is (filling object, created, period and items when
// empty), without sending a webhook.
func (s *Sim) Put(sub Subscription) {
	sub = normalize(sub, time.Now())
	s.mu.Lock()
	s.subs[sub.ID] = sub
	s.mu.Unlock()
}

// Get returns a copy of the stored subscription.
func (s *Sim) Get(id string) (Subscription, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, ok := s.subs[id]
	sub.Items.Data = slices.Clone(sub.Items.Data)
	return sub, ok
}

// SetLatency sets the delay added to each API response.
func (s *Sim) SetLatency(d time.Duration) {
	s.mu.Lock()
	s.latency = d
	s.mu.Unlock()
}

// SetFailure makes every API GET answer status (e.g. 500, 429, 401); 0
// restores normal answers.
func (s *Sim) SetFailure(status int) {
	s.mu.Lock()
	s.failure = status
	s.mu.Unlock()
}

// APICalls reports how many /v1 requests the simulator has received.
func (s *Sim) APICalls() int64 { return s.apiCalls.Load() }

// Event builds an event of eventType about obj.
func (s *Sim) Event(eventType string, obj any) (id string, body []byte) {
	ev := struct {
		ID         string `json:"id"`
		Object     string `json:"object"`
		Account    string `json:"account,omitempty"`
		APIVersion string `json:"api_version"`
		Created    int64  `json:"created"`
		Livemode   bool   `json:"livemode"`
		Type       string `json:"type"`
		Data       struct {
			Object any `json:"object"`
		} `json:"data"`
	}{
		ID: newID("evt_"), Object: "event", Account: s.cfg.Account, APIVersion: APIVersion,
		Created: time.Now().Unix(), Type: eventType,
	}
	ev.Data.Object = obj
	body, err := json.Marshal(ev)
	if err != nil {
		panic(fmt.Sprintf("stripesim: marshal event: %v", err)) // obj is not JSON: a bug in the caller
	}
	return ev.ID, body
}

// Send builds an event, signs it with WebhookSecret and POSTs it to
// WebhookURL. status is the receiver's HTTP status.
func (s *Sim) Send(ctx context.Context, eventType string, obj any) (eventID string, status int, err error) {
	if s.cfg.WebhookURL == "" {
		return "", 0, errors.New("stripesim: no WebhookURL configured")
	}
	eventID, body := s.Event(eventType, obj)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return eventID, 0, fmt.Errorf("stripesim: send %s: %w", eventID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(stripe.SignatureHeader, stripe.Sign(body, s.cfg.WebhookSecret, time.Now()))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return eventID, 0, fmt.Errorf("stripesim: send %s: %w", eventID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return eventID, resp.StatusCode, nil
}

// api wraps a /v1 handler with call counting, latency and injected failures.
func (s *Sim) api(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.apiCalls.Add(1)
		s.mu.Lock()
		latency, failure := s.latency, s.failure
		s.mu.Unlock()
		if latency > 0 {
			t := time.NewTimer(latency)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return
			}
		}
		if failure != 0 {
			writeError(w, failure, "", fmt.Sprintf("simulated failure %d", failure))
			return
		}
		h(w, r)
	}
}

func (s *Sim) getSubscription(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sub, ok := s.Get(id)
	if !ok {
		writeError(w, http.StatusNotFound, "resource_missing", fmt.Sprintf("No such subscription: '%s'", id))
		return
	}
	writeJSON(w, http.StatusOK, sub)
}

func (s *Sim) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	limit := 10
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			writeError(w, http.StatusBadRequest, "parameter_invalid_integer", "limit must be an integer between 1 and 100")
			return
		}
		limit = n
	}
	after := r.URL.Query().Get("starting_after")
	s.mu.Lock()
	ids := make([]string, 0, len(s.subs))
	for id := range s.subs {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	hasMore := len(ids) > limit
	ids = ids[:min(limit, len(ids))]
	data := make([]Subscription, len(ids))
	for i, id := range ids {
		data[i] = s.subs[id]
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "url": "/v1/subscriptions", "has_more": hasMore, "data": data,
	})
}

func (s *Sim) upsertSubscription(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ID                string `json:"id"`
		Customer          string `json:"customer"`
		Status            string `json:"status"`
		CancelAtPeriodEnd *bool  `json:"cancel_at_period_end"`
		CurrentPeriodEnd  int64  `json:"current_period_end"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	now := time.Now()
	s.mu.Lock()
	sub, exists := s.subs[in.ID]
	if !exists {
		sub = Subscription{ID: cmp.Or(in.ID, newID("sub_")), Customer: newID("cus_"), Status: "active"}
	}
	sub.Customer = cmp.Or(in.Customer, sub.Customer)
	sub.Status = cmp.Or(in.Status, sub.Status)
	sub.CurrentPeriodEnd = cmp.Or(in.CurrentPeriodEnd, sub.CurrentPeriodEnd)
	if in.CancelAtPeriodEnd != nil {
		sub.CancelAtPeriodEnd = *in.CancelAtPeriodEnd
	}
	if sub.Status == "canceled" && sub.CanceledAt == 0 {
		sub.CanceledAt = now.Unix()
	}
	sub = normalize(sub, now)
	s.subs[sub.ID] = sub
	s.mu.Unlock()
	eventType := "customer.subscription.updated"
	if !exists {
		eventType = "customer.subscription.created"
	}
	s.emit(w, r, eventType, "subscription", sub)
}

func (s *Sim) cancelSubscription(w http.ResponseWriter, r *http.Request) {
	var in struct {
		AtPeriodEnd bool `json:"at_period_end"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	id := r.PathValue("id")
	s.mu.Lock()
	sub, ok := s.subs[id]
	if !ok {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "resource_missing", fmt.Sprintf("No such subscription: '%s'", id))
		return
	}
	eventType := "customer.subscription.updated"
	if in.AtPeriodEnd {
		sub.CancelAtPeriodEnd = true
	} else {
		sub.Status, sub.CanceledAt = "canceled", time.Now().Unix()
		eventType = "customer.subscription.deleted"
	}
	sub.Items.Data = slices.Clone(sub.Items.Data)
	s.subs[id] = sub
	s.mu.Unlock()
	s.emit(w, r, eventType, "subscription", sub)
}

func (s *Sim) payInvoice(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Subscription string `json:"subscription"`
		AmountPaid   int64  `json:"amount_paid"`
	}
	if !readJSON(w, r, &in) {
		return
	}
	inv := Invoice{
		ID: r.PathValue("id"), Object: "invoice", Subscription: in.Subscription, Status: "paid",
		AmountPaid: in.AmountPaid, Currency: "usd", Created: time.Now().Unix(),
	}
	inv.Parent.SubscriptionDetails.Subscription = in.Subscription
	if sub, ok := s.Get(in.Subscription); ok {
		inv.Customer = sub.Customer
	}
	s.emit(w, r, "invoice.paid", "invoice", inv)
}

// emit sends the event and answers the control call with the object, the
// event id and the status the webhook receiver gave.
func (s *Sim) emit(w http.ResponseWriter, r *http.Request, eventType, name string, obj any) {
	id, status, err := s.Send(r.Context(), eventType, obj)
	out := map[string]any{name: obj, "event_id": id, "delivery_status": status}
	if err != nil {
		out["delivery_error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

// normalize fills what Stripe always sets. Items mirror the subscription's
// period: the simulator has one period per subscription.
func normalize(sub Subscription, now time.Time) Subscription {
	sub.ID = cmp.Or(sub.ID, newID("sub_"))
	sub.Object = "subscription"
	sub.Created = cmp.Or(sub.Created, now.Unix())
	sub.CurrentPeriodStart = cmp.Or(sub.CurrentPeriodStart, now.Unix())
	sub.CurrentPeriodEnd = cmp.Or(sub.CurrentPeriodEnd, time.Unix(sub.CurrentPeriodStart, 0).AddDate(0, 1, 0).Unix())
	sub.Items.Object = "list"
	sub.Items.Data = slices.Clone(sub.Items.Data)
	if len(sub.Items.Data) == 0 {
		sub.Items.Data = []Item{{ID: newID("si_")}}
	}
	for i := range sub.Items.Data {
		it := &sub.Items.Data[i]
		it.Object = "subscription_item"
		it.CurrentPeriodStart, it.CurrentPeriodEnd = sub.CurrentPeriodStart, sub.CurrentPeriodEnd
	}
	return sub
}

func newID(prefix string) string {
	return prefix + strings.ToLower(rand.Text())
}

// readJSON decodes an optional JSON body; an empty body leaves v zero.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v)
	if err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, "parameter_invalid", "invalid JSON body: "+err.Error())
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers in Stripe's error shape.
func writeError(w http.ResponseWriter, status int, code, message string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		typ = "authentication_error"
	case status == http.StatusTooManyRequests:
		typ, code = "rate_limit_error", cmp.Or(code, "rate_limit")
	case status >= 500:
		typ = "api_error"
	}
	e := map[string]string{"type": typ, "message": message}
	if code != "" {
		e["code"] = code
	}
	writeJSON(w, status, map[string]any{"error": e})
}
