package stripesim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"time"
)

// objectTypes are the objects besides subscriptions the simulator serves at
// GET /v1/<plural>/{id}, by collection path, with the id prefix Stripe
// gives each.
var objectTypes = map[string]struct{ object, prefix string }{
	"customers":       {"customer", "cus_"},
	"invoices":        {"invoice", "in_"},
	"payment_intents": {"payment_intent", "pi_"},
	"charges":         {"charge", "ch_"},
	"prices":          {"price", "price_"},
	"products":        {"product", "prod_"},
}

// objectKey names one stored object of a dataset.
type objectKey struct{ object, id string }

// PutObject stores an object of type object ("customer", "invoice",
// "payment_intent", "charge", "price", "product"; "subscription" goes to
// Put) in the simulator's own account, in live mode when fields says
// "livemode": true, and returns its id. It fills what Stripe always sets:
// id (with the type's prefix, unless fields has one), object, livemode,
// created. No webhook is sent.
func (s *Sim) PutObject(object string, fields map[string]any) string {
	return s.PutObjectFor(s.home, object, fields)
}

// PutObjectFor is PutObject into account's data.
func (s *Sim) PutObjectFor(account, object string, fields map[string]any) string {
	if object == "subscription" {
		var sub Subscription
		raw, err := json.Marshal(fields)
		if err == nil {
			err = json.Unmarshal(raw, &sub)
		}
		if err != nil {
			panic(fmt.Sprintf("stripesim: subscription fields: %v", err)) // a bug in the caller
		}
		sub.ID = cmp.Or(sub.ID, newID("sub_"))
		s.PutFor(account, sub)
		return sub.ID
	}
	prefix := ""
	for _, t := range objectTypes {
		if t.object == object {
			prefix = t.prefix
		}
	}
	if prefix == "" {
		panic(fmt.Sprintf("stripesim: no %q objects", object)) // a bug in the caller
	}
	obj := maps.Clone(fields)
	if obj == nil {
		obj = map[string]any{}
	}
	id, _ := obj["id"].(string)
	id = cmp.Or(id, newID(prefix))
	live, _ := obj["livemode"].(bool)
	obj["id"], obj["object"], obj["livemode"] = id, object, live
	if _, ok := obj["created"]; !ok {
		obj["created"] = time.Now().Unix()
	}
	d := dataset{account, live}
	s.mu.Lock()
	if s.objects[d] == nil {
		s.objects[d] = map[objectKey]map[string]any{}
	}
	s.objects[d][objectKey{object, id}] = obj
	s.mu.Unlock()
	return id
}

// DeleteCustomer deletes a test-mode customer of the simulator's own
// account as DELETE /v1/customers/{id} does: it stays retrievable, as
// {"id", "object": "customer", "deleted": true}
// (https://docs.stripe.com/api/customers/delete). It reports whether the
// customer existed.
func (s *Sim) DeleteCustomer(id string) bool {
	d := dataset{s.home, false}
	k := objectKey{"customer", id}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.objects[d][k]; !ok {
		return false
	}
	s.objects[d][k] = map[string]any{"id": id, "object": "customer", "deleted": true}
	return true
}

// getObject serves GET /v1/<plural>/{id} for one object type.
func (s *Sim) getObject(object string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		d := r.Context().Value(datasetKey{}).(dataset)
		s.mu.Lock()
		obj, ok := s.objects[d][objectKey{object, id}]
		if ok {
			obj = maps.Clone(obj)
		}
		s.mu.Unlock()
		if !ok {
			writeMissing(w, object, id)
			return
		}
		writeJSON(w, http.StatusOK, obj)
	}
}

// writeMissing answers as Stripe does for an id it does not know in the
// key's account and mode (https://docs.stripe.com/error-codes/resource-missing):
// 404, invalid_request_error, resource_missing, the id named in param.
func writeMissing(w http.ResponseWriter, object, id string) {
	writeJSON(w, http.StatusNotFound, map[string]any{"error": map[string]string{
		"type":    "invalid_request_error",
		"code":    "resource_missing",
		"doc_url": "https://stripe.com/docs/error-codes/resource-missing",
		"message": fmt.Sprintf("No such %s: '%s'", object, id),
		"param":   "id",
	}})
}
