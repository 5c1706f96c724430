package registry

import "github.com/hookyard/hookyard/pkg/provider"

// FactObject is where, in ev of providerName, a declared fact's object is
// when its declaration names no path (see provider.FactObjecter): "" (the
// whole event) for a provider that says nothing.
func FactObject(providerName string, ev provider.StoredEvent) string {
	p, _ := Lookup(providerName)
	if fo, ok := p.(provider.FactObjecter); ok {
		return fo.FactObject(ev)
	}
	return ""
}
