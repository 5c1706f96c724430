package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
)

// Scope is what a token may do on the ops API.
type Scope string

// Scopes of the ops API; docs/operations.md has the table of routes.
const (
	// ScopeAccess is the decision endpoint only (GET /v1/access/...): what
	// an application holds.
	ScopeAccess Scope = "access"
	// ScopeRead is timelines, lists, projections, jobs and the audit,
	// without payloads.
	ScopeRead Scope = "read"
	// ScopePayload adds payloads (?payload=true) to what read shows; a
	// payload read needs both.
	ScopePayload Scope = "payload"
	// ScopeOperate is replays, purges, action replays and erasures.
	ScopeOperate Scope = "operate"
)

// Scopes lists every scope, in the order of config.OpsScopes.
var Scopes = []Scope{ScopeAccess, ScopeRead, ScopePayload, ScopeOperate}

// OpsTokenName is the principal OPS_TOKEN authenticates (config.OpsTokenName).
const OpsTokenName = "OPS_TOKEN"

// Token is one bearer token, who holds it and what it may do.
type Token struct {
	// Name says who holds the token; the audit records it.
	Name string
	// Secret is the bearer token. An empty one never matches.
	Secret string
	Scopes []Scope
}

// Principal is who a request authenticated as.
type Principal struct {
	// Name is the token's name (OpsTokenName for OPS_TOKEN).
	Name   string
	scopes []Scope
}

// Has reports whether the principal holds scope s.
func (p Principal) Has(s Scope) bool { return slices.Contains(p.scopes, s) }

// ErrUnauthenticated: the request carries no bearer token, or one no
// configured token matches (401).
var ErrUnauthenticated = errors.New("bearer token required")

// Authenticator checks bearer tokens against OPS_TOKEN and the scoped
// tokens. Other pages on the ops address (the console) check their
// requests with it too.
type Authenticator struct {
	tokens []hashedToken
}

type hashedToken struct {
	sum       [sha256.Size]byte
	principal Principal
}

// NewAuthenticator returns an authenticator of opsToken (every scope,
// named OpsTokenName; "" for none) and the scoped tokens.
func NewAuthenticator(opsToken string, scoped []Token) *Authenticator {
	a := &Authenticator{}
	add := func(secret string, p Principal) {
		if secret != "" {
			a.tokens = append(a.tokens, hashedToken{sum: sha256.Sum256([]byte(secret)), principal: p})
		}
	}
	add(opsToken, Principal{Name: OpsTokenName, scopes: Scopes})
	for _, t := range scoped {
		add(t.Secret, Principal{Name: t.Name, scopes: slices.Clone(t.Scopes)})
	}
	return a
}

// Authenticate returns the principal of r's bearer token, or
// ErrUnauthenticated.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return Principal{}, ErrUnauthenticated
	}
	return a.AuthenticateToken(got)
}

// AuthenticateToken returns the principal of a token (the console's login
// form), or ErrUnauthenticated.
func (a *Authenticator) AuthenticateToken(got string) (Principal, error) {
	if got == "" {
		return Principal{}, ErrUnauthenticated
	}
	// Compared as SHA-256 sums, in constant time and against every token
	// without stopping at a match: neither the time nor the length of the
	// comparison tells how much of a guess was right, or which token it
	// was close to.
	sum := sha256.Sum256([]byte(got))
	match := -1
	for i, t := range a.tokens {
		eq := subtle.ConstantTimeCompare(sum[:], t.sum[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return Principal{}, ErrUnauthenticated
	}
	return a.tokens[match].principal, nil
}

const principalKey = "hookyard.principal"

// PrincipalOf returns the principal Require authenticated for c.
func PrincipalOf(c echo.Context) Principal {
	p, _ := c.Get(principalKey).(Principal)
	return p
}

// Require is middleware that answers 401 unauthorized without a valid
// token and 403 missing_scope to a valid token without scope s.
func (a *Authenticator) Require(s Scope) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			p, err := a.Authenticate(c.Request())
			if err != nil {
				return fail(c, http.StatusUnauthorized, "unauthorized", "bearer token required")
			}
			if !p.Has(s) {
				return missingScope(c, p, s)
			}
			c.Set(principalKey, p)
			return next(c)
		}
	}
}

func missingScope(c echo.Context, p Principal, s Scope) error {
	return fail(c, http.StatusForbidden, "missing_scope", fmt.Sprintf("token %q lacks scope %q", p.Name, s))
}
