package stripesim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// EventRetention is how far back GET /v1/events reaches: "List events,
// going back up to 30 days" (https://docs.stripe.com/api/events/list).
const EventRetention = 30 * 24 * time.Hour

// maxLoggedEvents bounds the event log of one dataset, so a benchmark that
// sends millions of webhooks does not keep them all.
const maxLoggedEvents = 100_000

// logged is an event in the simulator's event log.
type logged struct {
	id      string
	typ     string
	created int64
	seq     int64
	body    json.RawMessage
}

// Emit creates an event of eventType about obj, as Stripe does when the
// object changes, and logs it for GET /v1/events without delivering it: a
// webhook that never arrived. Send is Emit and a delivery.
func (s *Sim) Emit(eventType string, obj any) (id string, body []byte) {
	id, body = s.Event(eventType, obj)
	s.log(id, eventType, time.Now().Unix(), body)
	return id, body
}

// EmitAt is Emit with the event's created time set to at (to put events
// beyond the 30 days the list reaches, or inside an overlap window).
func (s *Sim) EmitAt(eventType string, obj any, at time.Time) (id string, body []byte) {
	id, body = s.Event(eventType, obj)
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		panic(fmt.Sprintf("stripesim: re-read event: %v", err))
	}
	m["created"] = at.Unix()
	body, _ = json.Marshal(m)
	s.log(id, eventType, at.Unix(), body)
	return id, body
}

func (s *Sim) log(id, typ string, created int64, body []byte) {
	d := dataset{account: s.home}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	l := append(s.events[d], logged{id: id, typ: typ, created: created, seq: s.seq, body: body})
	if len(l) > maxLoggedEvents {
		l = slices.Delete(l, 0, len(l)-maxLoggedEvents)
	}
	s.events[d] = l
}

// listEvents lists like GET /v1/events
// (https://docs.stripe.com/api/events/list), inconvenient parts first:
//   - only events of the last 30 days exist; older ones are gone, whatever
//     created filter is asked;
//   - newest first, cursor paging with starting_after and has_more, limit 1
//     to 100 (default 10) (https://docs.stripe.com/api/pagination);
//   - created[gte|gt|lte|lt] filter by the event's created (seconds);
//   - type (one name, "*" as a wildcard) or types[] (up to 20 exact names),
//     not both;
//   - a starting_after that is not an event of the list is a 400.
func (s *Sim) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, ok := listLimit(w, q)
	if !ok {
		return
	}
	types := q["types[]"]
	if len(types) > 20 {
		writeError(w, http.StatusBadRequest, "parameter_invalid_array", "types may contain at most 20 event types")
		return
	}
	typ := q.Get("type")
	if typ != "" && len(types) > 0 {
		writeError(w, http.StatusBadRequest, "parameter_unknown", "You may only specify one of these parameters: type, types.")
		return
	}
	bounds := map[string]int64{}
	for _, op := range []string{"gte", "gt", "lte", "lt"} {
		if v := q.Get("created[" + op + "]"); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, "parameter_invalid_integer", "created["+op+"] must be a timestamp")
				return
			}
			bounds[op] = n
		}
	}
	d := r.Context().Value(datasetKey{}).(dataset)
	cutoff := time.Now().Add(-EventRetention).Unix()
	s.mu.Lock()
	all := slices.Clone(s.events[d])
	s.mu.Unlock()
	slices.SortFunc(all, func(a, b logged) int { return cmp.Or(cmp.Compare(b.created, a.created), cmp.Compare(b.seq, a.seq)) })
	after := q.Get("starting_after")
	start := 0
	if after != "" {
		i := slices.IndexFunc(all, func(l logged) bool { return l.id == after })
		if i < 0 || all[i].created < cutoff {
			writeError(w, http.StatusBadRequest, "resource_missing", fmt.Sprintf("No such event: '%s'", after))
			return
		}
		start = i + 1
	}
	match := func(l logged) bool {
		if l.created < cutoff {
			return false
		}
		if v, ok := bounds["gte"]; ok && l.created < v {
			return false
		}
		if v, ok := bounds["gt"]; ok && l.created <= v {
			return false
		}
		if v, ok := bounds["lte"]; ok && l.created > v {
			return false
		}
		if v, ok := bounds["lt"]; ok && l.created >= v {
			return false
		}
		switch {
		case len(types) > 0:
			return slices.Contains(types, l.typ)
		case typ != "":
			return typeMatches(typ, l.typ)
		}
		return true
	}
	data := []json.RawMessage{}
	hasMore := false
	for _, l := range all[start:] {
		if !match(l) {
			continue
		}
		if len(data) == limit {
			hasMore = true
			break
		}
		data = append(data, l.body)
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/events", "has_more": hasMore, "data": data})
}

// typeMatches is the type parameter: an exact name, or "*" standing for
// any rest of the name ("invoice.*").
func typeMatches(pattern, typ string) bool {
	if n := len(pattern); n > 0 && pattern[n-1] == '*' {
		return len(typ) >= n-1 && typ[:n-1] == pattern[:n-1]
	}
	return pattern == typ
}
