package chargebee

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

const (
	user = "hookyard"
	pass = "s3cret:with:colons"
)

func endpoint(secrets ...string) *provider.Endpoint {
	if len(secrets) == 0 {
		secrets = []string{user + ":" + pass}
	}
	return &provider.Endpoint{
		ID: "ep_cb", Provider: provider.Chargebee, SourceAccount: "acme-test",
		Environment: "test", Secrets: secrets,
	}
}

func auth(v string) http.Header {
	h := http.Header{}
	h.Set(AuthorizationHeader, v)
	return h
}

const subCancelled = `{"id":"ev_16BPgETyVrQbiGhA","occurred_at":1700000000,"source":"admin_console",
"object":"event","api_version":"v2","event_type":"subscription_cancelled",
"content":{"subscription":{"id":"sub_42","customer_id":"cus_1","status":"cancelled","resource_version":1700000000123},
"customer":{"id":"cus_1","resource_version":1699999999000}}}`

func verify(t *testing.T, body string) (provider.Event, error) {
	t.Helper()
	return Verifier{}.Verify(endpoint(), auth(BasicAuth(user, pass)), []byte(body), time.Now())
}

func TestVerifyValid(t *testing.T) {
	t.Parallel()
	ev, err := verify(t, subCancelled)
	require.NoError(t, err)
	require.Equal(t, "ev_16BPgETyVrQbiGhA", ev.ID)
	require.Equal(t, "subscription_cancelled", ev.Type)
	require.Equal(t, "subscription", ev.ResourceType)
	require.Equal(t, "sub_42", ev.ResourceID)
	require.NotNil(t, ev.Version)
	require.Equal(t, int64(1700000000123), *ev.Version)
	require.Equal(t, []byte(subCancelled), ev.Payload)
	require.Equal(t, time.Unix(1700000000, 0).UTC(), ev.OccurredAt, "the provider's event time")
}

func TestBasicAuth(t *testing.T) {
	t.Parallel()
	require.Equal(t, "Basic "+base64.StdEncoding.EncodeToString([]byte("u:p")), BasicAuth("u", "p"))
	// It is what net/http sends for the same credentials.
	r, err := http.NewRequest(http.MethodPost, "http://x", nil)
	require.NoError(t, err)
	r.SetBasicAuth(user, pass)
	require.Equal(t, r.Header.Get(AuthorizationHeader), BasicAuth(user, pass))
}

func TestVerifySchemeCaseInsensitive(t *testing.T) {
	t.Parallel()
	v := "basic " + strings.TrimPrefix(BasicAuth(user, pass), "Basic ")
	_, err := Verifier{}.Verify(endpoint(), auth(v), []byte(subCancelled), time.Now())
	require.NoError(t, err)
}

func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	ep := endpoint("old:password", user+":"+pass)
	_, err := Verifier{}.Verify(ep, auth(BasicAuth(user, pass)), []byte(subCancelled), time.Now())
	require.NoError(t, err)
	_, err = Verifier{}.Verify(ep, auth(BasicAuth("old", "password")), []byte(subCancelled), time.Now())
	require.NoError(t, err)
}

func TestVerifyWrongCredentials(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]string{
		{user, "wrong"},
		{"wrong", pass},
		{user, pass + "x"},
		{user, ""},
		{"", ""},
		{user + ":" + pass, ""}, // the same bytes split differently
	} {
		_, err := Verifier{}.Verify(endpoint(), auth(BasicAuth(c[0], c[1])), []byte(subCancelled), time.Now())
		require.ErrorIs(t, err, provider.ErrUnauthenticated, c)
	}
}

func TestVerifyMisconfiguredSecretsNeverMatch(t *testing.T) {
	t.Parallel()
	ep := endpoint("", "nocolon", ":onlypassword", "onlyuser:", ":")
	for _, c := range [][2]string{{"", ""}, {"nocolon", ""}, {"", "onlypassword"}, {"onlyuser", ""}} {
		_, err := Verifier{}.Verify(ep, auth(BasicAuth(c[0], c[1])), []byte(subCancelled), time.Now())
		require.ErrorIs(t, err, provider.ErrUnauthenticated, c)
	}
	none := endpoint()
	none.Secrets = nil
	_, err := Verifier{}.Verify(none, auth(BasicAuth(user, pass)), []byte(subCancelled), time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyMissingOrBadHeader(t *testing.T) {
	t.Parallel()
	good := strings.TrimPrefix(BasicAuth(user, pass), "Basic ")
	for _, v := range []string{
		"",
		"Bearer " + good,
		good,
		"Basic",
		"Basic !!!",
		"Basic " + base64.StdEncoding.EncodeToString([]byte("nocolon")),
	} {
		h := http.Header{}
		if v != "" {
			h.Set(AuthorizationHeader, v)
		}
		_, err := Verifier{}.Verify(endpoint(), h, []byte(subCancelled), time.Now())
		require.ErrorIs(t, err, provider.ErrUnauthenticated, v)
	}
}

func TestVerifyNonCanonicalBase64(t *testing.T) {
	t.Parallel()
	ep := endpoint("u:pp")
	padded := BasicAuth("u", "pp")
	require.True(t, strings.HasSuffix(padded, "="))
	_, err := Verifier{}.Verify(ep, auth(padded), []byte(subCancelled), time.Now())
	require.NoError(t, err)
	for _, v := range []string{
		strings.TrimRight(padded, "="),             // unpadded
		strings.Replace(padded, "cA==", "cB==", 1), // non-zero trailing bits
	} {
		// A lenient decoder reads both as the configured credentials.
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(strings.TrimPrefix(v, "Basic "), "="))
		require.NoError(t, err)
		require.Equal(t, "u:pp", string(raw))
		_, err = Verifier{}.Verify(ep, auth(v), []byte(subCancelled), time.Now())
		require.ErrorIs(t, err, provider.ErrUnauthenticated, v)
	}
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"id":`,
		`not json`,
		``,
		`null`,
		`[]`,
		`{}`,
		`{"id":"ev_1"}`,
		`{"id":"ev_1","event_type":"subscription_created","content":[]}`,
		`{"id":"ev_1","event_type":"subscription_created","content":{"subscription":{"id":"sub_1","resource_version":"x"}}}`,
		`{"id":"ev_1","event_type":"subscription_created","content":{"subscription":{"id":"sub_1","resource_version":1.5}}}`,
		`{"id":"ev_1","event_type":"subscription_created","content":{"subscription":{"id":7}}}`,
	} {
		_, err := verify(t, body)
		require.ErrorIs(t, err, provider.ErrMalformed, body)
	}
}

func TestResourceMapping(t *testing.T) {
	t.Parallel()
	v := func(n int64) *int64 { return &n }
	cases := []struct {
		name, body, typ, id string
		version             *int64
	}{
		{
			"customer event picks the customer over the subscription",
			`{"id":"ev_1","event_type":"customer_changed","content":{"subscription":{"id":"sub_1","resource_version":1},"customer":{"id":"cus_1","resource_version":2}}}`,
			"customer", "cus_1", v(2),
		},
		{
			"invoice of a subscription goes with the subscription, without version",
			`{"id":"ev_2","event_type":"invoice_generated","content":{"invoice":{"id":"inv_1","subscription_id":"sub_9","resource_version":5}}}`,
			"subscription", "sub_9", nil,
		},
		{
			"invoice without subscription is its own resource",
			`{"id":"ev_3","event_type":"invoice_generated","content":{"invoice":{"id":"inv_2","resource_version":5}}}`,
			"invoice", "inv_2", v(5),
		},
		{
			"deletion is an ordinary event",
			`{"id":"ev_4","event_type":"subscription_deleted","content":{"subscription":{"id":"sub_3","resource_version":9}}}`,
			"subscription", "sub_3", v(9),
		},
		{
			"other type prefers the subscription",
			`{"id":"ev_5","event_type":"payment_succeeded","content":{"transaction":{"id":"txn_1"},"invoice":{"id":"inv_3","subscription_id":"sub_4"},"customer":{"id":"cus_4"},"subscription":{"id":"sub_4","resource_version":3}}}`,
			"subscription", "sub_4", v(3),
		},
		{
			"other type falls back to sorted keys",
			`{"id":"ev_6","event_type":"card_added","content":{"zeta":{"id":"z_1"},"card":{"id":"card_1","resource_version":"12"}}}`,
			"card", "card_1", v(12),
		},
		{
			"named object missing falls back to preference order",
			`{"id":"ev_7","event_type":"subscription_created","content":{"customer":{"id":"cus_7"}}}`,
			"customer", "cus_7", nil,
		},
		{
			"no object with an id",
			`{"id":"ev_8","event_type":"something_happened","content":{"list":[{"id":"x"}],"odd":{"id":3},"empty":{}}}`,
			"", "", nil,
		},
		{
			"unnamed content object is skipped",
			`{"id":"ev_10","event_type":"x_y","content":{"":{"id":"anon"},"plan":{"id":"plan_1"}}}`,
			"plan", "plan_1", nil,
		},
		{
			"no content",
			`{"id":"ev_9","event_type":"site_ping"}`,
			"", "", nil,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ev, err := verify(t, c.body)
			require.NoError(t, err)
			require.Equal(t, c.typ, ev.ResourceType)
			require.Equal(t, c.id, ev.ResourceID)
			require.Equal(t, c.version, ev.Version)
		})
	}
}

func TestMatchAnyChecksEverySecret(t *testing.T) {
	t.Parallel()
	// A match in any position, including the last, is found.
	secrets := []string{"a:1", "b:2", "c:3"}
	for _, s := range secrets {
		u, p, _ := strings.Cut(s, ":")
		require.True(t, matchAny(secrets, u, p), s)
	}
	require.False(t, matchAny(secrets, "a", "2"))
}

func FuzzVerify(f *testing.F) {
	f.Add([]byte(subCancelled), BasicAuth(user, pass))
	f.Add([]byte(subCancelled), BasicAuth(user, "x"))
	f.Add([]byte(`{}`), BasicAuth(user, pass))
	f.Add([]byte(`not json`), BasicAuth(user, pass))
	f.Add([]byte(`{"id":"ev","event_type":"invoice_x","content":{"invoice":{"id":"i","subscription_id":"s"}}}`), BasicAuth(user, pass))
	f.Add([]byte(subCancelled), "")
	f.Add([]byte(subCancelled), "Basic")
	f.Add([]byte(subCancelled), "basic  "+strings.TrimPrefix(BasicAuth(user, pass), "Basic "))
	f.Fuzz(func(t *testing.T, body []byte, authz string) {
		h := http.Header{}
		h[AuthorizationHeader] = []string{authz}
		ev, err := Verifier{}.Verify(endpoint(), h, body, time.Now())
		if err != nil {
			return
		}
		// Accepted: the header must carry exactly the configured credentials.
		scheme, cred, _ := strings.Cut(strings.TrimSpace(authz), " ")
		require.True(t, strings.EqualFold(scheme, "Basic"), authz)
		raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
		require.NoError(t, derr, authz)
		require.Equal(t, user+":"+pass, string(raw), authz)
		require.NotEmpty(t, ev.ID)
		require.NotEmpty(t, ev.Type)
	})
}

// FuzzParse authenticates whatever body it gets, so the reading after
// verification is fuzzed too: it must never panic and may refuse only as
// malformed, or as a version from the future (returned, to be kept).
func FuzzParse(f *testing.F) {
	f.Add([]byte(subCancelled))
	f.Add([]byte(`{"id":"e","event_type":"invoice_x","content":{"invoice":{"id":"i","subscription_id":"s","resource_version":"1"}}}`))
	f.Add([]byte(`{"id":"e","event_type":"x","content":{"b":{"id":"b"},"a":[],"c":{"id":2}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := Verifier{}.Verify(endpoint(), auth(BasicAuth(user, pass)), body, time.Now())
		if errors.Is(err, provider.ErrVersionFromFuture) {
			// Refused, and returned so the receiver keeps it dead.
			require.NotEmpty(t, ev.ID)
			return
		}
		if err != nil {
			require.ErrorIs(t, err, provider.ErrMalformed)
			return
		}
		require.NotEmpty(t, ev.ID)
		require.NotEmpty(t, ev.Type)
		require.Equal(t, ev.ResourceType == "", ev.ResourceID == "")
	})
}

// A resource_version (milliseconds) far ahead of the clock is refused with
// ErrVersionFromFuture, and the event comes back with it so it can be kept;
// within the skew (default 24h, per endpoint) it is an ordinary version.
func TestVersionFromTheFutureIsRefusedButReturned(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1700000000123)
	body := func(v int64) []byte {
		return []byte(fmt.Sprintf(`{"id":"ev_f","event_type":"subscription_changed","content":{"subscription":{"id":"sub_f","status":"active","resource_version":%d}}}`, v))
	}
	h := auth(BasicAuth(user, pass))

	ev, err := Verifier{}.Verify(endpoint(), h, body(now.Add(23*time.Hour).UnixMilli()), now)
	require.NoError(t, err)

	ev, err = Verifier{}.Verify(endpoint(), h, body(now.Add(25*time.Hour).UnixMilli()), now)
	require.ErrorIs(t, err, provider.ErrVersionFromFuture)
	require.Equal(t, "ev_f", ev.ID, "the event is returned to be kept under its identity")
	require.Equal(t, "sub_f", ev.ResourceID)

	ep := endpoint()
	ep.VersionSkew = time.Minute
	_, err = Verifier{}.Verify(ep, h, body(now.Add(2*time.Minute).UnixMilli()), now)
	require.ErrorIs(t, err, provider.ErrVersionFromFuture)
}
