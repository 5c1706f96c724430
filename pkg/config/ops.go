package config

import (
	"fmt"
	"slices"
)

// OpsScopes are the scopes of the ops API (api.Scope), in the order the
// docs list them: access (the decision endpoint only), read (timelines,
// lists, projections, without payloads), payload (payloads in addition to
// read) and operate (replays, purges). A test of the api package keeps the
// two lists in step.
var OpsScopes = []string{"access", "read", "payload", "operate"}

// OpsTokenName is the name OPS_TOKEN goes by in the audit; no scoped token
// may take it.
const OpsTokenName = "OPS_TOKEN"

// OpsAppTokenDevDefault is the example config's fallback for its
// access-only token (OPS_APP_TOKEN); like every dev fallback it is refused
// outside `hookyard dev`.
const OpsAppTokenDevDefault = "hookyard-dev-app-token"

// Ops configures the query/ops API's tokens beside OPS_TOKEN.
type Ops struct {
	// Tokens are bearer tokens limited to the scopes they name, in
	// addition to OPS_TOKEN (which has every scope). Several may hold the
	// same scopes at once, for rotation. Defaults to none.
	Tokens []OpsToken `yaml:"tokens"`
}

// OpsToken is one scoped bearer token.
type OpsToken struct {
	// Name says who holds the token; the audit records it. Required,
	// unique.
	Name string `yaml:"name"`
	// Token is the secret, e.g. "${APP_TOKEN}". Required where the API is
	// served; at least OpsTokenMinLen bytes outside `hookyard dev`.
	Token string `yaml:"token"`
	// Scopes are some of OpsScopes. Required.
	Scopes []string `yaml:"scopes"`
}

func (o Ops) validate(r reads) []error {
	var errs []error
	names := map[string]bool{}
	secrets := map[string]int{}
	for i, t := range o.Tokens {
		where := fmt.Sprintf("config: ops.tokens[%d]", i)
		switch {
		case t.Name == "":
			errs = append(errs, fmt.Errorf("%s.name is required", where))
		case t.Name == OpsTokenName:
			errs = append(errs, fmt.Errorf("%s.name %q is OPS_TOKEN's; choose another", where, t.Name))
		case names[t.Name]:
			errs = append(errs, fmt.Errorf("%s.name %q is defined twice", where, t.Name))
		}
		names[t.Name] = true
		if len(t.Scopes) == 0 {
			errs = append(errs, fmt.Errorf("%s.scopes needs at least one of %v", where, OpsScopes))
		}
		for _, s := range t.Scopes {
			if !slices.Contains(OpsScopes, s) {
				errs = append(errs, fmt.Errorf("%s.scopes: unknown scope %q (want some of %v)", where, s, OpsScopes))
			}
		}
		if t.Token == "" {
			// Only where the API is served: a receiver never reads it.
			if r.opsToken {
				errs = append(errs, fmt.Errorf("%s.token is empty (token %q; is its environment variable set?)", where, t.Name))
			}
			continue
		}
		// One secret under two names would make the audit's "who" a guess.
		if j, dup := secrets[t.Token]; dup {
			errs = append(errs, fmt.Errorf("%s.token is the token of ops.tokens[%d]; every token needs its own", where, j))
		}
		secrets[t.Token] = i
	}
	return errs
}

// checkOpsToken refuses, outside `hookyard dev`, a token that is missing,
// short or a dev default; what names it in the error.
func checkOpsToken(what, token string) error {
	if _, dev := DevSecrets[token]; dev || token == OpsTokenDevDefault {
		return fmt.Errorf("%w: %s is a dev token; set a random token of at least %d bytes", ErrDevDefault, what, OpsTokenMinLen)
	}
	if len(token) < OpsTokenMinLen {
		return fmt.Errorf("%w: %s is %d bytes; it must have at least %d", ErrDevDefault, what, len(token), OpsTokenMinLen)
	}
	return nil
}
