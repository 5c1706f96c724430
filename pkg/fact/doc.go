// Package fact owns the fact table: things a provider told us happened (an
// invoice paid), recorded by their own identity — provider, account,
// environment, fact type and fact id — whatever the current state of the
// resource they are about (invariant 8).
//
// Facts are declared (Declaration, the config's `facts`), not coded: which
// events make a fact, where its object and identity are in the event and
// which fields it keeps. Extract applies the declarations to any
// provider's event; a provider only says where its events carry their
// object (provider.FactObjecter).
//
// The processor records facts in its batch transaction, beside the event's
// mark, through QueueRecord; the effects sender and the ops tools read them
// by key. A fact is written once and never updated: a repeated event finds
// its fact already there and changes nothing. A fact keeps only the fields
// its Declaration names (amount, currency, customer, subscription, paid
// time), not the provider's whole object: that data is what every receipt
// carries. This package must never decide anything from a projection, and
// never delete or rewrite a fact, but for an erasure request (Erase), which
// empties its data and keeps its identity.
package fact
