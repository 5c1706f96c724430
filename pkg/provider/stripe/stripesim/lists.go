package stripesim

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"slices"
)

// listed are the object lists the simulator serves besides subscriptions
// and events, by collection path, with what each leaves out.
var listed = map[string]struct {
	object string
	// omit leaves an object out of the list, as Stripe's list does.
	omit func(obj map[string]any) bool
}{
	// "Returns a list of your customers" (https://docs.stripe.com/api/customers/list):
	// a deleted customer is not one of them any more, though
	// GET /v1/customers/{id} still answers it ("deleted": true).
	"customers": {"customer", func(obj map[string]any) bool { d, _ := obj["deleted"].(bool); return d }},
	// "You can list all invoices" (https://docs.stripe.com/api/invoices/list):
	// every status unless status= narrows it.
	"invoices": {"invoice", func(map[string]any) bool { return false }},
}

// listObjects lists like GET /v1/customers and GET /v1/invoices: newest
// first, limit 1 to 100 (default 10), cursor paging with starting_after
// and has_more (https://docs.stripe.com/api/pagination); a cursor the list
// does not hold (unknown, or a deleted customer) is 400 resource_missing.
// Objects created in the same second are ordered by id, the same way on
// every page.
func (s *Sim) listObjects(plural string) http.HandlerFunc {
	l := listed[plural]
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, ok := listLimit(w, q)
		if !ok {
			return
		}
		status := q.Get("status")
		d := r.Context().Value(datasetKey{}).(dataset)
		s.mu.Lock()
		var all []map[string]any
		for k, obj := range s.objects[d] {
			if k.object == l.object && !l.omit(obj) && (status == "" || obj["status"] == status) {
				all = append(all, maps.Clone(obj))
			}
		}
		s.mu.Unlock()
		order := func(a, b map[string]any) int {
			return cmp.Or(cmp.Compare(createdOf(b), createdOf(a)), cmp.Compare(fmt.Sprint(b["id"]), fmt.Sprint(a["id"])))
		}
		slices.SortFunc(all, order)
		start := 0
		if after := q.Get("starting_after"); after != "" {
			i := slices.IndexFunc(all, func(o map[string]any) bool { return o["id"] == after })
			if i < 0 {
				writeError(w, http.StatusBadRequest, "resource_missing", fmt.Sprintf("No such %s: '%s'", l.object, after))
				return
			}
			start = i + 1
		}
		data := all[start:]
		hasMore := len(data) > limit
		if hasMore {
			data = data[:limit]
		}
		if data == nil {
			data = []map[string]any{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "url": "/v1/" + plural, "has_more": hasMore, "data": data})
	}
}

// createdOf reads an object's creation time, as stored by PutObject.
func createdOf(obj map[string]any) int64 {
	switch v := obj["created"].(type) {
	case int64:
		return v
	case int:
		return int64(v)
	case float64:
		return int64(v)
	}
	return 0
}
