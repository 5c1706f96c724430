package standardwebhooks

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

var (
	secret    = "whsec_" + base64.StdEncoding.EncodeToString([]byte("current-key-0123456789abcdef"))
	oldSecret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("previous-key-0123456789abcde"))
	wrong     = "whsec_" + base64.StdEncoding.EncodeToString([]byte("wrong-key-0123456789abcdefgh"))
)

const msgID = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"

func endpoint(secrets ...string) *provider.Endpoint {
	if len(secrets) == 0 {
		secrets = []string{secret}
	}
	return &provider.Endpoint{
		ID: "ep_sw", Provider: provider.StandardWebhooks, SourceAccount: "acme",
		Environment: "test", Secrets: secrets,
		Paths: provider.Paths{ResourceID: "data.id", Version: "data.version"},
	}
}

func sign(t testing.TB, s string, ts time.Time, body string) http.Header {
	t.Helper()
	h, err := Sign(s, msgID, ts, []byte(body))
	require.NoError(t, err)
	return h
}

const subUpdated = `{"type":"subscription.updated","timestamp":"2024-01-01T00:00:00Z",
"data":{"id":"sub_1","object":"subscription","version":1700000000123,"status":"active"}}`

func TestVerifyValid(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ev, err := Verifier{}.Verify(endpoint(), sign(t, secret, now, subUpdated), []byte(subUpdated), now)
	require.NoError(t, err)
	require.Equal(t, msgID, ev.ID)
	require.Equal(t, "subscription.updated", ev.Type)
	require.Equal(t, "subscription", ev.ResourceType)
	require.Equal(t, "sub_1", ev.ResourceID)
	require.NotNil(t, ev.Version)
	require.Equal(t, int64(1700000000123), *ev.Version)
	require.Equal(t, []byte(subUpdated), ev.Payload)
	require.Equal(t, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), ev.OccurredAt, "the provider's event time")
}

func TestSignHeaders(t *testing.T) {
	t.Parallel()
	ts := time.Unix(1700000000, 0)
	h := sign(t, secret, ts, subUpdated)
	require.Equal(t, msgID, h.Get("webhook-id"))
	require.Equal(t, "1700000000", h.Get("webhook-timestamp"))
	require.True(t, strings.HasPrefix(h.Get("webhook-signature"), "v1,"))

	_, err := Sign("whsec_not base64!", msgID, ts, nil)
	require.Error(t, err)
}

func TestVerifyPaths(t *testing.T) {
	t.Parallel()
	v := func(n int64) *int64 { return &n }
	cases := []struct {
		name  string
		paths provider.Paths
		body  string
		typ   string
		rtype string
		rid   string
		ver   *int64
	}{
		{
			"defaults: no resource path means no resource",
			provider.Paths{},
			`{"type":"ping"}`,
			"ping", "", "", nil,
		},
		{
			"custom event type path and constant resource type",
			provider.Paths{EventType: "meta.kind", ResourceID: "payload.customer.id", ResourceTypeValue: "customer"},
			`{"meta":{"kind":"customer.created"},"payload":{"customer":{"id":"cus_1"}}}`,
			"customer.created", "customer", "cus_1", nil,
		},
		{
			"resource type from the body",
			provider.Paths{ResourceID: "data.id", ResourceType: "data.object", ResourceTypeValue: "ignored"},
			`{"type":"invoice.paid","data":{"id":"in_1","object":"invoice"}}`,
			"invoice.paid", "invoice", "in_1", nil,
		},
		{
			"numeric resource id and string version",
			provider.Paths{ResourceID: "data.id", Version: "data.rev"},
			`{"type":"x","data":{"id":12345678901234567890,"rev":"42"}}`,
			"x", "subscription", "12345678901234567890", v(42),
		},
		{
			"array index in a path",
			provider.Paths{ResourceID: "items.1.id"},
			`{"type":"x","items":[{"id":"a"},{"id":"b"}]}`,
			"x", "subscription", "b", nil,
		},
		{
			"resource absent: no resource, version not required",
			provider.Paths{ResourceID: "data.id", Version: "data.version"},
			`{"type":"ping","data":{}}`,
			"ping", "", "", nil,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			ep := endpoint()
			ep.Paths = c.paths
			ev, err := Verifier{}.Verify(ep, sign(t, secret, now, c.body), []byte(c.body), now)
			require.NoError(t, err)
			require.Equal(t, c.typ, ev.Type)
			require.Equal(t, c.rtype, ev.ResourceType)
			require.Equal(t, c.rid, ev.ResourceID)
			require.Equal(t, c.ver, ev.Version)
		})
	}
}

func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, err := Verifier{}.Verify(endpoint(oldSecret, secret), sign(t, secret, now, subUpdated), []byte(subUpdated), now)
	require.NoError(t, err)
}

func TestVerifyMisconfiguredSecretsSkipped(t *testing.T) {
	t.Parallel()
	now := time.Now()
	// An undecodable secret does not stop a later good one from verifying.
	_, err := Verifier{}.Verify(endpoint("whsec_%%%", secret), sign(t, secret, now, subUpdated), []byte(subUpdated), now)
	require.NoError(t, err)

	// An empty key never verifies, though anyone can sign with it.
	for _, s := range []string{"", "whsec_"} {
		h, err := Sign(s, msgID, now, []byte(subUpdated))
		require.NoError(t, err)
		_, err = Verifier{}.Verify(endpoint(s), h, []byte(subUpdated), now)
		require.ErrorIs(t, err, provider.ErrUnauthenticated, s)
	}
}

func TestVerifyWrongSecret(t *testing.T) {
	t.Parallel()
	now := time.Now()
	_, err := Verifier{}.Verify(endpoint(), sign(t, wrong, now, subUpdated), []byte(subUpdated), now)
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyMissingHeaders(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, name := range []string{IDHeader, TimestampHeader, SignatureHeader} {
		h := sign(t, secret, now, subUpdated)
		h.Del(name)
		_, err := Verifier{}.Verify(endpoint(), h, []byte(subUpdated), now)
		require.ErrorIs(t, err, provider.ErrUnauthenticated, name)
	}
}

func TestVerifyBadHeaders(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for name, value := range map[string]string{
		TimestampHeader: "not-a-number",
		SignatureHeader: "v1,not-the-signature",
		IDHeader:        "msg_other", // the id is signed
	} {
		for _, tol := range []time.Duration{0, time.Hour} {
			h := sign(t, secret, now, subUpdated)
			h.Set(name, value)
			ep := endpoint()
			ep.Tolerance = tol
			_, err := Verifier{}.Verify(ep, h, []byte(subUpdated), now)
			require.ErrorIs(t, err, provider.ErrUnauthenticated, name)
		}
	}
}

func TestVerifyStaleLibraryTolerance(t *testing.T) {
	t.Parallel()
	// With the default tolerance the library checks against the wall clock.
	now := time.Now()
	for _, ts := range []time.Time{now.Add(-10 * time.Minute), now.Add(10 * time.Minute)} {
		for _, tol := range []time.Duration{0, 5 * time.Minute} {
			ep := endpoint()
			ep.Tolerance = tol
			_, err := Verifier{}.Verify(ep, sign(t, secret, ts, subUpdated), []byte(subUpdated), now)
			require.ErrorIs(t, err, provider.ErrStaleSignature)
		}
	}
}

func TestVerifyStaleOwnTolerance(t *testing.T) {
	t.Parallel()
	// With another tolerance the timestamp is checked against now.
	now := time.Unix(1700000000, 0)
	ep := endpoint()
	ep.Tolerance = time.Minute
	for _, ts := range []time.Time{now.Add(-2 * time.Minute), now.Add(2 * time.Minute)} {
		_, err := Verifier{}.Verify(ep, sign(t, secret, ts, subUpdated), []byte(subUpdated), now)
		require.ErrorIs(t, err, provider.ErrStaleSignature, ts)
	}
	_, err := Verifier{}.Verify(ep, sign(t, secret, now.Add(-30*time.Second), subUpdated), []byte(subUpdated), now)
	require.NoError(t, err)

	// A wider tolerance admits what the library would refuse.
	wide := endpoint()
	wide.Tolerance = time.Hour
	_, err = Verifier{}.Verify(wide, sign(t, secret, now.Add(-30*time.Minute), subUpdated), []byte(subUpdated), now)
	require.NoError(t, err)

	// A forged delivery is unauthenticated, not stale, whatever its timestamp.
	_, err = Verifier{}.Verify(ep, sign(t, wrong, now.Add(-2*time.Hour), subUpdated), []byte(subUpdated), now)
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyTamperedBody(t *testing.T) {
	t.Parallel()
	now := time.Now()
	h := sign(t, secret, now, subUpdated)
	tampered := strings.Replace(subUpdated, "sub_1", "sub_2", 1)
	_, err := Verifier{}.Verify(endpoint(), h, []byte(tampered), now)
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"type":`,
		`not json`,
		``,
		`null`,
		`[]`,
		`{"type":"x"} {"type":"y"}`,
		`{}`,
		`{"type":7}`,
		`{"type":""}`,
		`{"type":"x","data":{"id":{"nested":true},"version":1}}`,
		`{"type":"x","data":{"id":"sub_1"}}`,
		`{"type":"x","data":{"id":"sub_1","version":1.5}}`,
		`{"type":"x","data":{"id":"sub_1","version":"v1"}}`,
		`{"type":"x","data":{"id":"sub_1","version":true}}`,
		`{"type":"x","data":{"id":"sub_1","version":99999999999999999999}}`,
	} {
		now := time.Now()
		_, err := Verifier{}.Verify(endpoint(), sign(t, secret, now, body), []byte(body), now)
		require.ErrorIs(t, err, provider.ErrMalformed, body)
	}

	// A configured resource type path that is absent is not guessed.
	now := time.Now()
	ep := endpoint()
	ep.Paths.ResourceType = "data.object"
	body := `{"type":"x","data":{"id":"sub_1","version":1}}`
	_, err := Verifier{}.Verify(ep, sign(t, secret, now, body), []byte(body), now)
	require.ErrorIs(t, err, provider.ErrMalformed)
}

func TestLookup(t *testing.T) {
	t.Parallel()
	doc, err := decode([]byte(`{"a":{"b":[{"c":1}],"d":null},"e.f":2}`))
	require.NoError(t, err)
	v, ok := lookup(doc, "a.b.0.c")
	require.True(t, ok)
	require.Equal(t, "1", v.(interface{ String() string }).String())
	v, ok = lookup(doc, "a.d")
	require.True(t, ok)
	require.Nil(t, v)
	for _, p := range []string{"a.x", "a.b.1", "a.b.-1", "a.b.c", "a.b.0.c.d", "", "e.f"} {
		_, ok := lookup(doc, p)
		require.False(t, ok, p)
	}
}

// signedBy reports whether the webhook-signature value carries the v1
// signature of body by s, as the sender computes it.
func signedBy(t *testing.T, sig string, ts time.Time, body []byte, s string) bool {
	h, err := Sign(s, msgID, ts, body)
	require.NoError(t, err)
	want := h.Get(SignatureHeader)
	for part := range strings.SplitSeq(sig, " ") {
		if part == want {
			return true
		}
	}
	return false
}

func FuzzVerify(f *testing.F) {
	now := time.Now()
	for _, body := range []string{subUpdated, `{}`, `not json`, ``, `{"type":"x","data":{"id":"s","version":"1"}}`} {
		for _, s := range []string{secret, wrong} {
			h, err := Sign(s, msgID, now, []byte(body))
			if err != nil {
				f.Fatal(err)
			}
			f.Add([]byte(body), h.Get(SignatureHeader))
		}
	}
	f.Add([]byte(subUpdated), "")
	f.Add([]byte(subUpdated), "v1,")
	f.Add([]byte(subUpdated), "v1a,abc v1,x,y v2,zz")
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		ts := time.Now()
		h := http.Header{}
		h.Set(IDHeader, msgID)
		h.Set(TimestampHeader, strconv.FormatInt(ts.Unix(), 10))
		h[http.CanonicalHeaderKey(SignatureHeader)] = []string{sig}
		ev, err := Verifier{}.Verify(endpoint(), h, body, ts)
		if err != nil {
			return
		}
		require.True(t, signedBy(t, sig, ts, body, secret), "accepted without a valid signature: %q", sig)
		require.Equal(t, msgID, ev.ID)
		require.NotEmpty(t, ev.Type)
	})
}

// FuzzParse signs whatever body it gets and reads it through fuzzed paths, so
// the reading after verification is fuzzed too: it must never panic and may
// refuse only as malformed, or as a version from the future (returned, to
// be kept).
func FuzzParse(f *testing.F) {
	f.Add([]byte(subUpdated), "type", "data.id", "", "data.version")
	f.Add([]byte(`{"a":[{"b":"c"}],"t":"x"}`), "t", "a.0.b", "a.0.b", "")
	f.Add([]byte(`{"type":"x","data":{"id":1,"version":"2"}}`), "", "data.id", "data", "data.version")
	f.Fuzz(func(t *testing.T, body []byte, typ, rid, rtype, version string) {
		now := time.Now()
		ep := endpoint()
		ep.Paths = provider.Paths{EventType: typ, ResourceID: rid, ResourceType: rtype, Version: version}
		ev, err := Verifier{}.Verify(ep, sign(t, secret, now, string(body)), body, now)
		if errors.Is(err, provider.ErrVersionFromFuture) {
			// Refused, and returned so the receiver keeps it dead.
			require.NotEmpty(t, ev.ID)
			return
		}
		if err != nil {
			require.ErrorIs(t, err, provider.ErrMalformed)
			return
		}
		require.Equal(t, msgID, ev.ID)
		require.NotEmpty(t, ev.Type)
		require.Equal(t, ev.ResourceType == "", ev.ResourceID == "")
	})
}
