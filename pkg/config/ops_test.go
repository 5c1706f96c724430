package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
)

const strongToken = "0123456789abcdef0123456789abcdef"

// A scoped token names its scopes; several may exist at once (rotation).
// A scope the API does not know, a token without scopes, two tokens with
// one name or one secret (the audit could not say who) are config errors
// naming the field.
func TestOpsTokensNameTheirScopes(t *testing.T) {
	t.Parallel()
	doc := []byte(`ops:
  tokens:
    - {name: app, token: "${APP_TOKEN}", scopes: [access]}
    - {name: app-next, token: "${APP_TOKEN_NEXT}", scopes: [access]}
    - {name: support, token: "${SUPPORT_TOKEN}", scopes: [read, payload]}
`)
	env := map[string]string{"APP_TOKEN": strongToken, "APP_TOKEN_NEXT": strongToken + "-next", "SUPPORT_TOKEN": strongToken + "-support"}
	c, err := config.Parse(doc, lookup(env))
	require.NoError(t, err)
	require.Len(t, c.Ops.Tokens, 3)
	require.Equal(t, config.OpsToken{Name: "support", Token: strongToken + "-support", Scopes: []string{"read", "payload"}}, c.Ops.Tokens[2])

	for doc, want := range map[string]string{
		`{name: a, token: x, scopes: [admin]}`:                                     `ops.tokens[0].scopes: unknown scope "admin"`,
		`{name: a, token: x, scopes: []}`:                                          "ops.tokens[0].scopes",
		`{name: "", token: x, scopes: [read]}`:                                     "ops.tokens[0].name is required",
		`{name: OPS_TOKEN, token: x, scopes: [read]}`:                              "ops.tokens[0].name",
		`{name: a, token: x, scopes: [read]}, {name: a, token: y, scopes: [read]}`: `ops.tokens[1].name "a" is defined twice`,
		`{name: a, token: x, scopes: [read]}, {name: b, token: x, scopes: [read]}`: "ops.tokens[1].token is the token of ops.tokens[0]",
	} {
		_, err := config.Parse([]byte("ops:\n  tokens: ["+doc+"]\n"), lookup(nil))
		require.ErrorContains(t, err, want, doc)
	}
	// A token whose variable is unset is an error where the API is served,
	// not in a service that never reads it.
	unset := []byte("ops:\n  tokens: [{name: app, token: \"${APP_TOKEN}\", scopes: [access]}]\n")
	_, err = config.ParseService(unset, lookup(nil), "api")
	require.ErrorContains(t, err, "ops.tokens[0].token is empty")
	_, err = config.ParseService(unset, lookup(nil), "receiver")
	require.NoError(t, err)
}

// Outside `hookyard dev` every ops token, scoped ones included, must be
// long and no dev default; the error names the token.
func TestScopedTokensOutsideDevAreLongAndNotDevDefaults(t *testing.T) {
	t.Parallel()
	for token, why := range map[string]string{
		"short":                      "is 5 bytes",
		config.OpsTokenDevDefault:    "dev",
		config.OpsAppTokenDevDefault: "dev",
	} {
		doc := []byte("ops:\n  tokens: [{name: app, token: \"" + token + "\", scopes: [access]}]\n")
		c, err := config.ParseService(doc, lookup(map[string]string{"OPS_TOKEN": strongToken}), "api")
		require.NoError(t, err)
		err = c.CheckService("api")
		require.ErrorIs(t, err, config.ErrDevDefault, token)
		require.ErrorContains(t, err, `ops.tokens[0] ("app")`, token)
		require.ErrorContains(t, err, why, token)
	}
	doc := []byte("ops:\n  tokens: [{name: app, token: \"" + strings.Repeat("k", config.OpsTokenMinLen) + "\", scopes: [access]}]\n")
	c, err := config.ParseService(doc, lookup(map[string]string{"OPS_TOKEN": strongToken}), "api")
	require.NoError(t, err)
	require.NoError(t, c.CheckService("api"))
}

// Retention has a floor under purges and a retention of its own for the
// audit: defaults 1h and 400 days; payload_age under the floor is refused.
func TestRetentionHasAPurgeFloorAndAnAuditAge(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("endpoints: []\n"), lookup(nil))
	require.NoError(t, err)
	require.Equal(t, time.Hour, c.Retention.MinPurgeAge)
	require.Equal(t, 400*24*time.Hour, c.Retention.AuditAge)

	_, err = config.Parse([]byte("retention: {payload_age: 1ns}\n"), lookup(nil))
	require.ErrorContains(t, err, "retention.payload_age 1ns is below retention.min_purge_age 1h0m0s")
	_, err = config.Parse([]byte("retention: {payload_age: 10m, min_purge_age: 5m}\n"), lookup(nil))
	require.NoError(t, err)
	_, err = config.Parse([]byte("retention: {audit_age: -1h}\n"), lookup(nil))
	require.ErrorContains(t, err, "retention.audit_age")
}
