package fact

import (
	"errors"
	"fmt"
	"strings"
)

// Declaration says which fields of a provider's object a fact of one type
// keeps in its data: what a receipt and recovery need (amount, currency,
// customer id, subscription, paid time), never the whole object a provider
// sent (a customer's e-mail, name, address). It is the config's
// `facts` entry; a declaration may later also say which events make the
// fact, where its object is and what its identity is, and keep this shape.
type Declaration struct {
	// Provider is the provider's name (stripe, chargebee).
	Provider string `yaml:"provider"`
	// Type is the fact type (invoice_paid).
	Type string `yaml:"type"`
	// Fields are the object's fields kept, as dotted paths
	// (status_transitions.paid_at); see provider.Keep.
	Fields []string `yaml:"fields"`
}

// Declarations are the declared facts. A fact type no declaration names
// keeps no data ({}): its identity, resource and event are still recorded.
type Declarations []Declaration

// Defaults declares the facts the built-in providers record.
var Defaults = Declarations{
	{Provider: "stripe", Type: "invoice_paid", Fields: []string{"id", "object", "status", "amount_paid", "currency",
		"customer", "subscription", "parent.subscription_details.subscription", "status_transitions.paid_at", "created"}},
	{Provider: "chargebee", Type: "invoice_paid", Fields: []string{"id", "status", "total", "amount_paid", "currency_code",
		"customer_id", "subscription_id", "paid_at", "date"}},
}

// With returns the declarations of d and, for each provider and type d
// does not declare, the Defaults': a configured declaration replaces the
// default one whole.
func (d Declarations) With(defaults Declarations) Declarations {
	out := append(Declarations(nil), d...)
	for _, def := range defaults {
		if out.find(def.Provider, def.Type) == nil {
			out = append(out, def)
		}
	}
	return out
}

func (d Declarations) find(provider, typ string) *Declaration {
	for i := range d {
		if d[i].Provider == provider && d[i].Type == typ {
			return &d[i]
		}
	}
	return nil
}

// Fields returns the fields a fact of provider and type keeps; nil when
// none is declared (the fact keeps no data).
func (d Declarations) Fields(provider, typ string) []string {
	if dec := d.find(provider, typ); dec != nil {
		return dec.Fields
	}
	return nil
}

// Validate checks each declaration; its errors name the entry.
func (d Declarations) Validate() error {
	var errs []error
	seen := map[[2]string]bool{}
	for i, dec := range d {
		where := fmt.Sprintf("facts[%d]", i)
		if dec.Provider == "" || dec.Type == "" {
			errs = append(errs, fmt.Errorf("%s: provider and type are required", where))
		}
		k := [2]string{dec.Provider, dec.Type}
		if seen[k] {
			errs = append(errs, fmt.Errorf("%s: %s %s is declared twice", where, dec.Provider, dec.Type))
		}
		seen[k] = true
		if len(dec.Fields) == 0 {
			errs = append(errs, fmt.Errorf("%s: fields must name at least one field (an empty list keeps nothing: leave the fact out)", where))
		}
		for j, f := range dec.Fields {
			if strings.TrimSpace(f) == "" || strings.Contains(f, "..") || strings.HasPrefix(f, ".") || strings.HasSuffix(f, ".") {
				errs = append(errs, fmt.Errorf("%s.fields[%d]: %q is not a dotted field path", where, j, f))
			}
		}
	}
	return errors.Join(errs...)
}
