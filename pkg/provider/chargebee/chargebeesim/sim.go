// Package chargebeesim is an in-process Chargebee site for `hookyard dev`
// and tests: it keeps subscriptions, creates an event for each change,
// delivers events to a webhook URL with Basic credentials, and serves the
// events list.
//
// It imitates the parts of Chargebee that catch integrations out, first:
//   - the API authenticates with the site's API key as the Basic user name
//     and an empty password (https://apidocs.chargebee.com/docs/api/auth);
//     anything else is a 401;
//   - GET /api/v2/events (https://apidocs.chargebee.com/docs/api/events#list_events)
//     pages by offset: a page carries next_offset, an opaque string to be
//     sent back as offset, and the last page none; limit is 1 to 100
//     (default 10);
//   - occurred_at[after] / [before] are exclusive and in seconds, so
//     several events in one second sit on both sides of a bound the caller
//     chose by time; sort_by[asc] or sort_by[desc] = occurred_at, newest
//     first when not asked;
//   - each list entry wraps the event: {"event": {...}}; the event is the
//     same document a webhook delivers (id, occurred_at, event_type,
//     content.<object> with resource_version in milliseconds).
//
// Control endpoints for curl:
//
//	POST /sim/subscriptions   {"id","status"}   create or change a subscription (and deliver the event)
//	POST /sim/down            {"down": true}    webhooks fail (events are still created and listed)
package chargebeesim

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
	"time"

	"github.com/hookyard/hookyard/internal/simhttp"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
)

// DevAPIKey is the API key a simulator built without Config.APIKey accepts.
const DevAPIKey = "cb_test_hookyard_dev"

// Config configures a Sim.
type Config struct {
	// WebhookURL receives events; empty delivers none.
	WebhookURL string
	// Username and Password are the webhook's Basic credentials.
	Username, Password string
	// APIKey is the site's API key. Defaults to DevAPIKey.
	APIKey string
	// HTTPClient sends webhooks; nil uses a client with a 10s timeout.
	HTTPClient *http.Client
}

type logged struct {
	id         string
	occurredAt int64
	seq        int64
	body       json.RawMessage
}

// Sim is safe for concurrent use.
type Sim struct {
	cfg  Config
	mux  *http.ServeMux
	mu   sync.Mutex
	seq  int64
	down bool
	subs map[string]map[string]any
	log  []logged
}

// New returns a site with no subscriptions and no events.
func New(cfg Config) *Sim {
	cfg.APIKey = cmp.Or(cfg.APIKey, DevAPIKey)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Sim{cfg: cfg, mux: http.NewServeMux(), subs: map[string]map[string]any{}}
	s.mux.HandleFunc("GET /api/v2/events", s.listEvents)
	s.mux.HandleFunc("POST /sim/subscriptions", s.simSubscription)
	s.mux.HandleFunc("POST /sim/down", simhttp.Down(s.SetDown))
	return s
}

// ServeHTTP serves the API and the control endpoints.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// SetDown makes webhook deliveries fail (the events are still created).
func (s *Sim) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// PutSubscription creates or changes subscription id to status, creates
// its event (subscription_created or subscription_changed, or
// subscription_cancelled for "cancelled") with a new resource_version, and
// delivers it unless the site is down. It returns the event id and the
// receiver's status (0 when not delivered).
func (s *Sim) PutSubscription(ctx context.Context, id, status string) (eventID string, code int, err error) {
	now := time.Now()
	s.mu.Lock()
	sub, exists := s.subs[id]
	if !exists {
		sub = map[string]any{"id": id, "object": "subscription", "customer_id": "cust_" + id, "created_at": now.Unix()}
		s.subs[id] = sub
	}
	sub["status"] = status
	sub["updated_at"] = now.Unix()
	// resource_version is the change's time in milliseconds; two changes in
	// one millisecond still grow.
	v := now.UnixMilli()
	if prev, ok := sub["resource_version"].(int64); ok && v <= prev {
		v = prev + 1
	}
	sub["resource_version"] = v
	snapshot := map[string]any{}
	for k, x := range sub {
		snapshot[k] = x
	}
	s.mu.Unlock()
	typ := "subscription_changed"
	switch {
	case !exists:
		typ = "subscription_created"
	case status == "cancelled":
		typ = "subscription_cancelled"
	}
	return s.Emit(ctx, typ, map[string]any{"subscription": snapshot})
}

// Emit creates an event of eventType with content, logs it for the events
// list and delivers it unless the site is down.
func (s *Sim) Emit(ctx context.Context, eventType string, content map[string]any) (eventID string, code int, err error) {
	now := time.Now()
	ev := map[string]any{"id": "ev_" + strings.ToLower(rand.Text()), "object": "event", "api_version": "v2",
		"source": "admin_console", "occurred_at": now.Unix(), "event_type": eventType, "content": content,
		"webhook_status": "not_configured"}
	body, err := json.Marshal(ev)
	if err != nil {
		return "", 0, fmt.Errorf("chargebeesim: encode event: %w", err)
	}
	eventID = ev["id"].(string)
	s.mu.Lock()
	s.seq++
	s.log = append(s.log, logged{id: eventID, occurredAt: now.Unix(), seq: s.seq, body: body})
	down := s.down
	s.mu.Unlock()
	if down || s.cfg.WebhookURL == "" {
		return eventID, 0, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return eventID, 0, fmt.Errorf("chargebeesim: deliver %s: %w", eventID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth(s.cfg.Username, s.cfg.Password))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return eventID, 0, nil // not reached: the event stays listed, as at Chargebee
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return eventID, resp.StatusCode, nil
}

// offset is the opaque next_offset: the position after the last event of
// a page, in the page's order.
type offset struct {
	At  int64 `json:"t"`
	Seq int64 `json:"s"`
}

func (s *Sim) listEvents(w http.ResponseWriter, r *http.Request) {
	if user, pass, ok := r.BasicAuth(); !ok || user != s.cfg.APIKey || pass != "" {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "Sorry, authentication failed. Invalid api key",
			"type": "", "api_error_code": "api_authentication_failed", "error_code": "api_authentication_failed", "http_status_code": 401})
		return
	}
	q := r.URL.Query()
	bad := func(param string) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"message": param + " : invalid value", "param": param,
			"type": "invalid_request", "api_error_code": "param_wrong_value", "http_status_code": 400})
	}
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			bad("limit")
			return
		}
		limit = n
	}
	bound := func(name string) (int64, bool, bool) {
		v := q.Get(name)
		if v == "" {
			return 0, false, true
		}
		n, err := strconv.ParseInt(v, 10, 64)
		return n, true, err == nil
	}
	after, hasAfter, ok1 := bound("occurred_at[after]")
	before, hasBefore, ok2 := bound("occurred_at[before]")
	if !ok1 || !ok2 {
		bad("occurred_at")
		return
	}
	asc := q.Get("sort_by[asc]") == "occurred_at"
	if v := q.Get("sort_by[asc]") + q.Get("sort_by[desc]"); v != "" && v != "occurred_at" {
		bad("sort_by")
		return
	}
	var from *offset
	if v := q.Get("offset"); v != "" {
		var o offset
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			bad("offset")
			return
		}
		from = &o
	}
	s.mu.Lock()
	all := slices.Clone(s.log)
	s.mu.Unlock()
	// next_offset is opaque and names where the previous page stopped; one
	// that names no event Chargebee still keeps is refused as a wrong
	// parameter, in Chargebee's error shape
	// (https://apidocs.chargebee.com/docs/api/error-handling), not read as
	// "from the start".
	if from != nil && !slices.ContainsFunc(all, func(l logged) bool { return l.seq == from.Seq && l.occurredAt == from.At }) {
		bad("offset")
		return
	}
	order := func(a, b logged) int {
		return cmp.Or(cmp.Compare(a.occurredAt, b.occurredAt), cmp.Compare(a.seq, b.seq))
	}
	if !asc {
		order = func(a, b logged) int {
			return cmp.Or(cmp.Compare(b.occurredAt, a.occurredAt), cmp.Compare(b.seq, a.seq))
		}
	}
	slices.SortFunc(all, order)
	list := []map[string]json.RawMessage{}
	var next *offset
	var last logged
	for _, l := range all {
		if (hasAfter && l.occurredAt <= after) || (hasBefore && l.occurredAt >= before) {
			continue
		}
		if from != nil && order(l, logged{occurredAt: from.At, seq: from.Seq}) <= 0 {
			continue
		}
		if len(list) == limit {
			next = &offset{At: last.occurredAt, Seq: last.seq}
			break
		}
		list = append(list, map[string]json.RawMessage{"event": l.body})
		last = l
	}
	out := map[string]any{"list": list}
	if next != nil {
		b, _ := json.Marshal(next)
		out["next_offset"] = string(b)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Sim) simSubscription(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": err.Error()})
		return
	}
	in.ID = cmp.Or(in.ID, "sub_"+strings.ToLower(rand.Text()))
	id, code, err := s.PutSubscription(r.Context(), in.ID, cmp.Or(in.Status, "active"))
	out := map[string]any{"subscription_id": in.ID, "event_id": id, "delivery_status": code}
	if err != nil {
		out["error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) { simhttp.WriteJSON(w, status, v) }
