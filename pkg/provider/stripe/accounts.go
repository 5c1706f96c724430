package stripe

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/hookyard/hookyard/pkg/provider"
)

// SubscriptionTerminal are the subscription statuses Stripe never leaves:
// "canceled" (a canceled subscription cannot be updated) and
// "incomplete_expired" ("a terminal state",
// https://docs.stripe.com/api/subscriptions/object#subscription_object-status).
// A projection in one of them needs no periodic re-check.
var SubscriptionTerminal = []string{"canceled", "incomplete_expired"}

// Scope is whose data an API call reads: an endpoint's source account and
// environment, the same pair that starts every resource's key.
type Scope struct {
	SourceAccount string
	Environment   string
}

// Account is how the resources of one Scope are read: the client holding
// its endpoint's API key (with that key's rate limiter and breaker) and the
// connected account to act for ("" for the key's own account).
type Account struct {
	Client        *Client
	StripeAccount string
}

// Accounts finds the credentials of a scope. Built once from the config;
// safe for concurrent use.
type Accounts struct {
	byScope map[Scope]Account
}

// credentials identify one Client: the same key acting for the same account
// in the same mode is one rate limit and one breaker, whichever endpoints
// use it.
type credentials struct {
	key, stripeAccount string
	live               bool
}

// NewAccounts builds the Accounts of every Stripe endpoint. base supplies
// what all clients share (BaseURL, Timeout, rate, breaker); APIKey and Live
// come from each endpoint: its api_key (or fallbackKey, STRIPE_API_KEY, when
// it names none) and its environment.
//
// It refuses configurations that would read the wrong account's data: a
// Stripe endpoint with no key at all, two endpoints of one source account
// and environment that name different credentials, and two source accounts
// (or environments) that would call Stripe with the same credentials, i.e.
// read the same data under two identities (typically an endpoint whose
// api_key variable is unset falling back to another account's key).
func NewAccounts(base APIConfig, endpoints []provider.Endpoint, fallbackKey string, log *slog.Logger) (*Accounts, error) {
	a := &Accounts{byScope: map[Scope]Account{}}
	clients := map[credentials]*Client{}
	owner := map[Scope]string{}        // scope -> first endpoint id
	users := map[credentials]string{}  // credentials -> first endpoint id
	scopeOf := map[credentials]Scope{} // credentials -> its scope
	for _, ep := range endpoints {
		if ep.Provider != provider.Stripe {
			continue
		}
		cr := credentials{key: cmp.Or(ep.APIKey, fallbackKey), stripeAccount: ep.StripeAccount, live: ep.Live()}
		if cr.key == "" {
			return nil, fmt.Errorf("stripe endpoint %q has no api_key and STRIPE_API_KEY is not set", ep.ID)
		}
		if err := CheckKeyMode(cr.key, ep.Live()); err != nil {
			return nil, fmt.Errorf("stripe endpoint %q (environment %q) %w", ep.ID, ep.Environment, err)
		}
		sc := Scope{SourceAccount: ep.SourceAccount, Environment: ep.Environment}
		if prev, ok := a.byScope[sc]; ok {
			if prev.Client.cfg.APIKey != cr.key || prev.StripeAccount != cr.stripeAccount {
				return nil, fmt.Errorf("stripe endpoints %q and %q share source account %q and environment %q but name different api_key or stripe_account",
					owner[sc], ep.ID, sc.SourceAccount, sc.Environment)
			}
			continue
		}
		if other, ok := scopeOf[cr]; ok && other != sc {
			return nil, fmt.Errorf("stripe endpoints %q and %q would read the same Stripe data (same api_key and stripe_account) as two source accounts or environments (%s/%s, %s/%s): give each its own api_key or stripe_account",
				users[cr], ep.ID, other.SourceAccount, other.Environment, sc.SourceAccount, sc.Environment)
		}
		cl := clients[cr]
		if cl == nil {
			cfg := base
			cfg.APIKey, cfg.Live = cr.key, cr.live
			cl = NewClient(cfg, log)
			clients[cr] = cl
			users[cr], scopeOf[cr] = ep.ID, sc
		}
		owner[sc] = ep.ID
		a.byScope[sc] = Account{Client: cl, StripeAccount: cr.stripeAccount}
	}
	return a, nil
}

// For returns the credentials of sourceAccount in environment. ok is false
// when no Stripe endpoint names that pair: the caller must fail rather than
// read with someone else's key.
func (a *Accounts) For(sourceAccount, environment string) (Account, bool) {
	acct, ok := a.byScope[Scope{SourceAccount: sourceAccount, Environment: environment}]
	return acct, ok
}

// Scopes lists every scope with credentials, sorted.
func (a *Accounts) Scopes() []Scope {
	out := make([]Scope, 0, len(a.byScope))
	for sc := range a.byScope {
		out = append(out, sc)
	}
	slices.SortFunc(out, func(x, y Scope) int {
		return cmp.Or(strings.Compare(x.SourceAccount, y.SourceAccount), strings.Compare(x.Environment, y.Environment))
	})
	return out
}

// CheckKeyMode refuses a key whose name says it reads the other mode:
// Stripe's secret and restricted keys start with sk_test_/rk_test_ or
// sk_live_/rk_live_ (https://docs.stripe.com/keys). A key of another form
// (a Stripe-compatible server's) is not judged by its name; the objects'
// livemode still is.
func CheckKeyMode(key string, live bool) error {
	var keyLive bool
	switch {
	case strings.HasPrefix(key, "sk_live_"), strings.HasPrefix(key, "rk_live_"):
		keyLive = true
	case strings.HasPrefix(key, "sk_test_"), strings.HasPrefix(key, "rk_test_"):
		keyLive = false
	default:
		return nil
	}
	if keyLive != live {
		return fmt.Errorf("would use a %s-mode key for %s-mode data", modes[keyLive], modes[live])
	}
	return nil
}
