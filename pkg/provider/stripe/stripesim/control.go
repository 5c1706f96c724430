package stripesim

// The control endpoints under /sim/ that people trying hookyard call with
// curl: create, cancel and pay, each sending the webhook Stripe would.

import (
	"cmp"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

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
	d := dataset{account: s.home}
	s.mu.Lock()
	st, exists := s.data[d][in.ID]
	sub := st.sub
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
	s.putLocked(d, sub)
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
	d := dataset{account: s.home}
	s.mu.Lock()
	st, ok := s.data[d][id]
	sub := st.sub
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
	s.putLocked(d, sub)
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
	// Stored before it is announced, as Stripe's is: an endpoint that
	// projects invoices fetches GET /v1/invoices/{id} on the event.
	raw, err := json.Marshal(inv)
	var fields map[string]any
	if err == nil {
		err = json.Unmarshal(raw, &fields)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "", err.Error())
		return
	}
	s.PutObject("invoice", fields)
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
	if sub.Metadata == nil {
		sub.Metadata = map[string]string{}
	}
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
