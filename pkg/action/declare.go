package action

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Effect declares one kind of external effect: what causes it (a fact of
// type OnFact, or a projection transition On) and where it is POSTed. It
// is the config's `effects.declare` entry.
//
// Its stable key says what caused it, so that no replay or reprocessing
// makes a second one for one cause: a fact's effect is keyed by the fact's
// identity, (account, fact id, kind), as receipts always were; a
// transition's by the resource and the observation that showed it (its
// version, or the fetch's sequence number for a fetched resource).
type Effect struct {
	// Kind names the effect (receipt); it is part of its key. Required.
	Kind string `yaml:"kind"`
	// OnFact is the fact type whose recording causes the effect.
	OnFact string `yaml:"on_fact"`
	// Provider limits OnFact to one provider's facts. Defaults to any.
	Provider string `yaml:"provider"`
	// On is the projection transition that causes the effect. Exactly one
	// of OnFact and On is set.
	On *Transition `yaml:"on"`
	// URL is where the effect is POSTed (absolute http or https). Defaults
	// to URLEnv's value; with neither, the effect is recorded and stays
	// pending. The receipt's defaults to effects.receipt_url
	// (RECEIPT_WEBHOOK_URL).
	URL string `yaml:"url"`
	// URLEnv names an environment variable holding the URL; when set, it
	// overrides URL.
	URLEnv string `yaml:"url_env"`
}

// Transition is a change of a resource's projection: its status becoming
// To (from anything else, no projection included), or, with Deleted, its
// deletion.
type Transition struct {
	// Type is the resource type (subscription). Required.
	Type string `yaml:"type"`
	// Field is the field that changes; only "status" (the projection's
	// status) is read. Defaults to "status".
	Field string `yaml:"field"`
	// To is the status it changes to (canceled).
	To string `yaml:"to"`
	// Deleted matches the resource's deletion instead of a status.
	Deleted bool `yaml:"deleted"`
}

// Matches reports whether a write to a resourceType projection that found
// the state labelled previous ("" for none) and wrote label (see
// projection.Label) is this transition.
func (t Transition) Matches(resourceType, previous, label string) bool {
	if t.Type != resourceType || previous == label {
		return false
	}
	if t.Deleted {
		return label == "deleted"
	}
	return label == t.To
}

// Effects are the declared effects.
type Effects []Effect

// DefaultEffects declares the receipt of a paid invoice.
var DefaultEffects = Effects{{Kind: KindReceipt, OnFact: "invoice_paid"}}

// With returns e and each effect of defaults whose kind e does not declare.
func (e Effects) With(defaults Effects) Effects {
	out := append(Effects(nil), e...)
	for _, def := range defaults {
		if out.Find(def.Kind) == nil {
			out = append(out, def)
		}
	}
	return out
}

// Find returns the effect of kind; nil when none is declared.
func (e Effects) Find(kind string) *Effect {
	for i := range e {
		if e[i].Kind == kind {
			return &e[i]
		}
	}
	return nil
}

// OnFact returns the kinds of the effects a fact of providerName and
// factType causes, in declaration order.
func (e Effects) OnFact(providerName, factType string) []string {
	var kinds []string
	for _, ef := range e {
		if ef.OnFact == factType && factType != "" && (ef.Provider == "" || ef.Provider == providerName) {
			kinds = append(kinds, ef.Kind)
		}
	}
	return kinds
}

// FactType is the type of the fact an effect of kind is about; "" for a
// transition's effect or an undeclared kind.
func (e Effects) FactType(kind string) string {
	if ef := e.Find(kind); ef != nil {
		return ef.OnFact
	}
	return ""
}

// Validate checks each effect; its errors name the entry.
func (e Effects) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for i, ef := range e {
		where := fmt.Sprintf("effects.declare[%d]", i)
		switch {
		case ef.Kind == "":
			errs = append(errs, fmt.Errorf("%s: kind is required", where))
		case seen[ef.Kind]:
			errs = append(errs, fmt.Errorf("%s: kind %s is declared twice", where, ef.Kind))
		}
		seen[ef.Kind] = true
		if (ef.OnFact == "") == (ef.On == nil) {
			errs = append(errs, fmt.Errorf("%s: exactly one of on_fact and on is required", where))
		}
		if t := ef.On; t != nil {
			if t.Type == "" {
				errs = append(errs, fmt.Errorf("%s.on: type is required", where))
			}
			if t.Field != "" && t.Field != "status" {
				errs = append(errs, fmt.Errorf("%s.on: field %q: only status is read", where, t.Field))
			}
			if t.Deleted == (t.To != "") {
				errs = append(errs, fmt.Errorf("%s.on: exactly one of to and deleted is required", where))
			}
		}
		if ef.On != nil && ef.Provider != "" {
			errs = append(errs, fmt.Errorf("%s: provider only limits on_fact", where))
		}
		if ef.URL != "" {
			if err := CheckURL(ef.URL); err != nil {
				errs = append(errs, fmt.Errorf("%s.url: %w", where, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Cause is the observation that showed a resource's transition: a
// versioned write's version, or a fetched write's fetch sequence number.
type Cause struct {
	Version  *int64
	FetchSeq int64
}

// TransitionSubject is the subject of a transition effect: the resource
// and the observation that caused it, so that the same observation (a
// replay, a redelivery, a reprocessing) names the same action, and no
// resource id can make another resource's subject (the type holds no "/",
// the cause is after the last "@").
func TransitionSubject(resourceType, resourceID string, c Cause) string {
	if c.Version != nil {
		return resourceType + "/" + resourceID + "@v" + strconv.FormatInt(*c.Version, 10)
	}
	return resourceType + "/" + resourceID + "@f" + strconv.FormatInt(c.FetchSeq, 10)
}

// TransitionBody is the document a transition effect POSTs; it is stored
// with the action when recorded, so every attempt sends the same bytes. It
// holds identities and status labels only: no resource state, nothing
// personal.
type TransitionBody struct {
	ActionKey     string `json:"action_key"`
	Kind          string `json:"kind"`
	Provider      string `json:"provider"`
	SourceAccount string `json:"source_account"`
	Environment   string `json:"environment"`
	ResourceType  string `json:"resource_type"`
	ResourceID    string `json:"resource_id"`
	Field         string `json:"field"`
	From          string `json:"from"`
	To            string `json:"to"`
	Version       *int64 `json:"version,omitempty"`
	FetchSeq      int64  `json:"fetch_seq,omitempty"`
	EventID       string `json:"event_id"`
}

// TransitionRecord is the action record of effect kind for a transition of
// resource (provider, account, environment, type, id) from previous to
// label, shown by cause and event eventID; its Body is stored with it.
func TransitionRecord(k Key, resourceType, resourceID, previous, label string, c Cause, eventID string, traceParent *string) Record {
	k.SubjectID = TransitionSubject(resourceType, resourceID, c)
	b := TransitionBody{ActionKey: k.String(), Kind: k.Kind, Provider: k.Provider, SourceAccount: k.SourceAccount,
		Environment: k.Environment, ResourceType: resourceType, ResourceID: resourceID, Field: "status",
		From: previous, To: label, Version: c.Version, EventID: eventID}
	if c.Version == nil {
		b.FetchSeq = c.FetchSeq
	}
	body, _ := json.Marshal(b) // a struct of strings and integers always encodes
	return Record{Key: k, EventID: eventID, TraceParent: traceParent, Body: body}
}
