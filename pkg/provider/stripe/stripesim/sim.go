package stripesim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookyard/hookyard/internal/simhttp"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
)

// APIVersion is the api_version stamped on events.
const APIVersion = "2025-03-31.basil"

// The key and account a simulator built without Config.Keys knows.
const (
	// DevAPIKey is the secret key of DevAccount (test mode). The example
	// config's Stripe endpoint uses it by default, so `hookyard dev` works
	// without a real key.
	DevAPIKey = "sk_test_hookyard_dev"
	// DevAccount is the account DevAPIKey belongs to, and the account Put,
	// Get and the /sim/ control endpoints work on unless Config.Account
	// names another.
	DevAccount = "acct_dev"
)

// Config configures a Sim.
type Config struct {
	// WebhookURL is where signed events are POSTed, e.g.
	// http://127.0.0.1:8080/webhooks/stripe-dev.
	WebhookURL string
	// WebhookSecret signs events (whsec_...).
	WebhookSecret string
	// Account is stamped as the events' "account" (Connect); "" sends
	// platform events without the field. When set, Put, Get and the /sim/
	// control endpoints work on this account, and with the default Keys it
	// is connected to DevAccount, so DevAPIKey with "Stripe-Account:
	// <Account>" reads it, as a Connect platform's key would.
	Account string
	// Keys maps each secret API key the simulator accepts to the account it
	// belongs to. As with Stripe's keys, one whose name contains "_live_"
	// (sk_live_..., rk_live_...) reads live-mode objects and any other one
	// test-mode objects. Any other key, or none, is answered 401. Defaults to
	// {DevAPIKey: DevAccount}.
	Keys map[string]string
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
	// Metadata is the subscription's key-value pairs; Stripe always
	// sends the object, {} when empty.
	Metadata map[string]string `json:"metadata"`
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

// dataset is what one key reads: an account's objects in one mode. Stripe
// keeps test-mode and live-mode data of an account apart, and a key sees
// only its own mode (https://docs.stripe.com/keys).
type dataset struct {
	account string
	live    bool
}

// stored is a subscription and its place in creation order.
type stored struct {
	sub Subscription
	seq int64
}

// Sim is the simulator. It is an http.Handler and safe for concurrent use.
type Sim struct {
	cfg      Config
	home     string
	mux      *http.ServeMux
	apiCalls atomic.Int64

	mu        sync.Mutex
	data      map[dataset]map[string]stored
	seq       int64
	keys      map[string]string
	connected map[string]map[string]bool // platform -> connected accounts
	latency   time.Duration
	failure   int
	events    map[dataset][]logged
	// objects are the objects other than subscriptions (PutObject).
	objects map[dataset]map[objectKey]map[string]any
}

// New returns an empty simulator.
func New(cfg Config) *Sim {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Sim{cfg: cfg, home: cmp.Or(cfg.Account, DevAccount), data: map[dataset]map[string]stored{},
		keys: map[string]string{}, connected: map[string]map[string]bool{}, latency: cfg.Latency,
		events: map[dataset][]logged{}, objects: map[dataset]map[objectKey]map[string]any{}}
	if cfg.Keys == nil {
		s.keys[DevAPIKey] = DevAccount
		if s.home != DevAccount {
			s.connectLocked(DevAccount, s.home)
		}
	}
	for k, a := range cfg.Keys {
		s.keys[k] = a
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /v1/subscriptions/{id}", s.api(s.getSubscription))
	s.mux.HandleFunc("GET /v1/subscriptions", s.api(s.listSubscriptions))
	s.mux.HandleFunc("GET /v1/events", s.api(s.listEvents))
	for plural := range listed {
		s.mux.HandleFunc("GET /v1/"+plural, s.api(s.listObjects(plural)))
	}
	for plural, t := range objectTypes {
		s.mux.HandleFunc("GET /v1/"+plural+"/{id}", s.api(s.getObject(t.object)))
	}
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

// Put stores sub in the simulator's own account (Config.Account, else
// DevAccount), in live mode when sub.Livemode, as is (filling object,
// created, period and items when empty), without sending a webhook.
func (s *Sim) Put(sub Subscription) { s.PutFor(s.home, sub) }

// PutFor is Put into account's data.
func (s *Sim) PutFor(account string, sub Subscription) {
	sub = normalize(sub, time.Now())
	s.mu.Lock()
	s.putLocked(dataset{account, sub.Livemode}, sub)
	s.mu.Unlock()
}

// putLocked stores sub, keeping its place in creation order when it exists.
func (s *Sim) putLocked(d dataset, sub Subscription) {
	m := s.data[d]
	if m == nil {
		m = map[string]stored{}
		s.data[d] = m
	}
	st, ok := m[sub.ID]
	if !ok {
		s.seq++
		st.seq = s.seq
	}
	st.sub = sub
	m[sub.ID] = st
}

// Get returns a copy of a test-mode subscription of the simulator's own
// account.
func (s *Sim) Get(id string) (Subscription, bool) { return s.GetFor(s.home, false, id) }

// GetFor returns a copy of account's subscription id in the given mode.
func (s *Sim) GetFor(account string, live bool, id string) (Subscription, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.data[dataset{account, live}][id]
	st.sub.Items.Data = slices.Clone(st.sub.Items.Data)
	st.sub.Metadata = maps.Clone(st.sub.Metadata)
	return st.sub, ok
}

// AddKey makes the API accept key as account's (live mode when the key's
// name contains "_live_").
func (s *Sim) AddKey(key, account string) {
	s.mu.Lock()
	s.keys[key] = account
	s.mu.Unlock()
}

// Connect makes connected a connected account of platform: platform's keys
// with "Stripe-Account: <connected>" read connected's objects
// (https://docs.stripe.com/connect/authentication).
func (s *Sim) Connect(platform, connected string) {
	s.mu.Lock()
	s.connectLocked(platform, connected)
	s.mu.Unlock()
}

func (s *Sim) connectLocked(platform, connected string) {
	if s.connected[platform] == nil {
		s.connected[platform] = map[string]bool{}
	}
	s.connected[platform][connected] = true
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
	eventID, body := s.Emit(eventType, obj)
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
		d, ok := s.authenticate(w, r)
		if !ok {
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), datasetKey{}, d)))
	}
}

type datasetKey struct{}

// authenticate finds the dataset a request reads, answering as Stripe does
// when it cannot (https://docs.stripe.com/api/authentication,
// https://docs.stripe.com/api/errors): 401 without a key or with an unknown
// one, 403 when Stripe-Account names an account the key's account is not a
// Connect platform of.
func (s *Sim) authenticate(w http.ResponseWriter, r *http.Request) (dataset, bool) {
	key, _, basic := r.BasicAuth() // curl -u sk_test_...: sends the key as the user name
	if !basic {
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	if key == "" {
		writeError(w, http.StatusUnauthorized, "", "You did not provide an API key. You need to provide your API key in the Authorization header, using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY').")
		return dataset{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	account, ok := s.keys[key]
	if !ok {
		writeError(w, http.StatusUnauthorized, "", "Invalid API Key provided: "+redact(key))
		return dataset{}, false
	}
	d := dataset{account: account, live: strings.Contains(key, "_live_")}
	if acting := r.Header.Get("Stripe-Account"); acting != "" && acting != account {
		if !s.connected[account][acting] {
			writeError(w, http.StatusForbidden, "", fmt.Sprintf(
				"The provided key '%s' does not have access to account '%s' (or that account does not exist). Application access may have been revoked.", redact(key), acting))
			return dataset{}, false
		}
		d.account = acting
	}
	return d, true
}

// redact shows a key the way Stripe's error messages do: prefix and the
// last four characters.
func redact(key string) string {
	if len(key) <= 12 {
		return "****"
	}
	prefix, _, _ := strings.Cut(key, "_")
	return prefix + "_****" + key[len(key)-4:]
}

func (s *Sim) getSubscription(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d := r.Context().Value(datasetKey{}).(dataset)
	sub, ok := s.GetFor(d.account, d.live, id)
	if !ok {
		writeMissing(w, "subscription", id)
		return
	}
	writeJSON(w, http.StatusOK, sub)
}

// listSubscriptions lists like GET /v1/subscriptions
// (https://docs.stripe.com/api/subscriptions/list): newest first, limit 1
// to 100 (default 10), cursor paging with starting_after and has_more
// (https://docs.stripe.com/api/pagination). Without status, canceled
// subscriptions are left out: "Passing in a value of all will return
// subscriptions of all statuses. If no value is supplied, all subscriptions
// that have not been canceled are returned." A reconciler that forgets
// status=all never sees a cancellation whose webhook was lost.
func (s *Sim) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := listLimit(w, q)
	if !ok {
		return
	}
	keep, ok := statusFilter(q.Get("status"))
	if !ok {
		writeError(w, http.StatusBadRequest, "parameter_invalid_string", fmt.Sprintf("Invalid status: %q", q.Get("status")))
		return
	}
	d := r.Context().Value(datasetKey{}).(dataset)
	after := q.Get("starting_after")
	s.mu.Lock()
	all := make([]stored, 0, len(s.data[d]))
	for _, st := range s.data[d] {
		all = append(all, st)
	}
	var cursor stored
	if after != "" {
		var found bool
		if cursor, found = s.data[d][after]; !found {
			s.mu.Unlock()
			writeError(w, http.StatusBadRequest, "resource_missing", fmt.Sprintf("No such subscription: '%s'", after))
			return
		}
	}
	s.mu.Unlock()
	slices.SortFunc(all, newestFirst)
	data := []Subscription{}
	hasMore := false
	for _, st := range all {
		if after != "" && newestFirst(st, cursor) <= 0 {
			continue
		}
		if !keep(st.sub.Status) {
			continue
		}
		if len(data) == limit {
			hasMore = true
			break
		}
		st.sub.Items.Data = slices.Clone(st.sub.Items.Data)
		data = append(data, st.sub)
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list", "url": "/v1/subscriptions", "has_more": hasMore, "data": data,
	})
}

// newestFirst orders by creation time, newest first; objects created in the
// same second keep the order they were stored in.
func newestFirst(a, b stored) int {
	return cmp.Or(cmp.Compare(b.sub.Created, a.sub.Created), cmp.Compare(b.seq, a.seq))
}

// statusFilter is the list's status parameter.
func statusFilter(status string) (func(string) bool, bool) {
	switch status {
	case "":
		return func(s string) bool { return s != "canceled" }, true
	case "all":
		return func(string) bool { return true }, true
	case "ended":
		return func(s string) bool { return s == "canceled" || s == "incomplete_expired" }, true
	case "active", "canceled", "incomplete", "incomplete_expired", "past_due", "paused", "trialing", "unpaid":
		return func(s string) bool { return s == status }, true
	}
	return nil, false
}

func writeJSON(w http.ResponseWriter, status int, v any) { simhttp.WriteJSON(w, status, v) }

// writeError answers in Stripe's error shape.
func writeError(w http.ResponseWriter, status int, code, message string) {
	typ := "invalid_request_error"
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		// Stripe answers a missing or unknown key, and a key without access
		// to the Stripe-Account, with this type (https://docs.stripe.com/api/errors).
		typ = "invalid_request_error"
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

// listLimit reads a list's limit, 1 to 100 and 10 when absent
// (https://docs.stripe.com/api/pagination); anything else is answered 400
// as Stripe does, and ok is false.
func listLimit(w http.ResponseWriter, q url.Values) (limit int, ok bool) {
	v := q.Get("limit")
	if v == "" {
		return 10, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 100 {
		writeError(w, http.StatusBadRequest, "parameter_invalid_integer", "limit must be an integer between 1 and 100")
		return 0, false
	}
	return n, true
}
