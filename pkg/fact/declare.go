package fact

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
)

// Declaration declares one fact type of one provider: which events make
// it (On), where its object is in the event (Object), its identity inside
// the object (ID), an optional link to the resource it is about
// (Resource), a condition on the object (When) and which of the object's
// fields it keeps (Fields): what a receipt and recovery need (amount,
// currency, customer id, subscription, paid time), never the whole object
// a provider sent (a customer's e-mail, name, address). It is the config's
// `facts` entry. Providers code no fact: Extract applies the declarations
// to every event.
type Declaration struct {
	// Provider is the provider's name (stripe, chargebee).
	Provider string `yaml:"provider"`
	// Type is the fact type (invoice_paid). With the provider, account,
	// environment and ID it is the fact's identity: a fact is recorded
	// once per identity, however many events carry it.
	Type string `yaml:"type"`
	// On are the event types that make the fact. Empty: any event whose
	// object is there and meets When. An event named here whose object or
	// identity is missing is malformed (kept dead, for inspection).
	On []string `yaml:"on"`
	// Object is the dotted path of the fact's object in the event.
	// Defaults to the provider's (provider.FactObjecter: Stripe's
	// data.object, Chargebee's content.<the event's resource type>,
	// Standard Webhooks' data, GitHub's whole payload).
	Object string `yaml:"object"`
	// ID is the dotted path of the fact's identity inside the object.
	// Defaults to "id".
	ID string `yaml:"id"`
	// Resource links the fact to a resource named inside the object.
	// Defaults to none: the fact is about the event's resource.
	Resource *ResourceLink `yaml:"resource"`
	// When are conditions on the object's fields (dotted path → value, as
	// text); all must hold. Defaults to none.
	When map[string]string `yaml:"when"`
	// Fields are the object's fields kept, as dotted paths
	// (status_transitions.paid_at); see provider.Keep.
	Fields []string `yaml:"fields"`
}

// ResourceLink names the resource a fact is about: its type, and the
// dotted path of its id inside the fact's object.
type ResourceLink struct {
	Type string `yaml:"type"`
	ID   string `yaml:"id"`
}

// Declarations are the declared facts. A fact type no declaration names
// is never recorded.
type Declarations []Declaration

// Defaults declares the facts the built-in providers record: a paid
// invoice, under the invoice's id (so facts recorded before facts were
// declared keep their identity).
var Defaults = Declarations{
	{Provider: "stripe", Type: "invoice_paid", On: []string{"invoice.paid", "invoice.payment_succeeded"}, Object: "data.object", ID: "id",
		Fields: []string{"id", "object", "status", "amount_paid", "currency",
			"customer", "subscription", "parent.subscription_details.subscription", "status_transitions.paid_at", "created"}},
	// Chargebee carries the invoice beside the event's resource, in any
	// event about it; it is paid when its status says so.
	{Provider: "chargebee", Type: "invoice_paid", Object: "content.invoice", ID: "id", When: map[string]string{"status": "paid"},
		Fields: []string{"id", "status", "total", "amount_paid", "currency_code",
			"customer_id", "subscription_id", "paid_at", "date"}},
}

// With returns the declarations of d and, for each provider and type d
// does not declare, the Defaults'. A configured declaration replaces the
// default one, but for what it leaves unsaid (on, object, id, resource,
// when): those are the default's, so a config that only chose the fields
// (as configs did before facts said more) still records the same facts.
func (d Declarations) With(defaults Declarations) Declarations {
	out := make(Declarations, 0, len(d)+len(defaults))
	for _, dec := range d {
		if def := defaults.find(dec.Provider, dec.Type); def != nil {
			if len(dec.On) == 0 {
				dec.On = def.On
			}
			dec.Object = cmp.Or(dec.Object, def.Object)
			dec.ID = cmp.Or(dec.ID, def.ID)
			if dec.Resource == nil {
				dec.Resource = def.Resource
			}
			if dec.When == nil {
				dec.When = def.When
			}
		}
		out = append(out, dec)
	}
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
			if !isPath(f) {
				errs = append(errs, fmt.Errorf("%s.fields[%d]: %q is not a dotted field path", where, j, f))
			}
		}
		if dec.Object != "" && !isPath(dec.Object) {
			errs = append(errs, fmt.Errorf("%s.object: %q is not a dotted field path", where, dec.Object))
		}
		if dec.ID != "" && !isPath(dec.ID) {
			errs = append(errs, fmt.Errorf("%s.id: %q is not a dotted field path", where, dec.ID))
		}
		if r := dec.Resource; r != nil && (r.Type == "" || !isPath(r.ID)) {
			errs = append(errs, fmt.Errorf("%s.resource: type and id (a dotted field path) are required", where))
		}
		for k := range dec.When {
			if !isPath(k) {
				errs = append(errs, fmt.Errorf("%s.when: %q is not a dotted field path", where, k))
			}
		}
		for j, on := range dec.On {
			if strings.TrimSpace(on) == "" {
				errs = append(errs, fmt.Errorf("%s.on[%d]: an event type is required", where, j))
			}
		}
	}
	return errors.Join(errs...)
}

// isPath reports whether p is a dotted field path (a.b.c).
func isPath(p string) bool {
	return strings.TrimSpace(p) != "" && !strings.Contains(p, "..") && !strings.HasPrefix(p, ".") && !strings.HasSuffix(p, ".")
}
