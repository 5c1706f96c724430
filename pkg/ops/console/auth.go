package console

import (
	"crypto/subtle"
	"slices"
)

// Scopes a principal may hold.
const (
	// ScopeAccess: projections and access decisions (the applications' API).
	ScopeAccess = "access"
	// ScopeRead: the console's pages, without event payloads.
	ScopeRead = "read"
	// ScopePayload: an event's payload (personal data; every read is logged).
	ScopePayload = "payload"
	// ScopeOperate: replays and job cancels.
	ScopeOperate = "operate"
)

// AllScopes is what the ops token (OPS_TOKEN) grants.
var AllScopes = Scopes{ScopeAccess, ScopeRead, ScopePayload, ScopeOperate}

// Scopes is a set of scopes.
type Scopes []string

// Has reports whether s holds scope.
func (s Scopes) Has(scope string) bool { return slices.Contains(s, scope) }

// Principal is who a token belongs to.
type Principal struct {
	Name   string
	Scopes Scopes
}

// Authenticator says whom a token belongs to. The scoped tokens of the ops
// API plug in here; TokenAuthenticator is the single ops token.
type Authenticator interface {
	Authenticate(token string) (Principal, bool)
}

// TokenAuthenticator accepts the one ops token, with every scope.
type TokenAuthenticator struct {
	Token string
}

// Authenticate implements Authenticator.
func (a TokenAuthenticator) Authenticate(token string) (Principal, bool) {
	if a.Token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(a.Token)) != 1 {
		return Principal{}, false
	}
	return Principal{Name: "ops", Scopes: AllScopes}, true
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(token string) (Principal, bool)

// Authenticate implements Authenticator.
func (f AuthenticatorFunc) Authenticate(token string) (Principal, bool) { return f(token) }
