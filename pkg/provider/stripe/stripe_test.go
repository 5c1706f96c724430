package stripe

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82/webhook"

	"github.com/hookyard/hookyard/pkg/provider"
)

const (
	secret    = "whsec_test_current"
	oldSecret = "whsec_test_previous"
)

func endpoint(secrets ...string) *provider.Endpoint {
	if len(secrets) == 0 {
		secrets = []string{secret}
	}
	return &provider.Endpoint{
		ID: "ep_stripe", Provider: provider.Stripe, SourceAccount: "acct_owner",
		Environment: "test", Secrets: secrets,
	}
}

func header(sig string) http.Header {
	h := http.Header{}
	h.Set(SignatureHeader, sig)
	return h
}

const subUpdated = `{"id":"evt_1","object":"event","type":"customer.subscription.updated","livemode":false,"created":1700000000,
"data":{"object":{"id":"sub_1","object":"subscription","status":"active"}}}`

func TestVerifyValid(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(subUpdated)
	ev, err := Verifier{}.Verify(endpoint(), header(Sign(body, secret, now)), body, now)
	require.NoError(t, err)
	require.Equal(t, "evt_1", ev.ID)
	require.Equal(t, "customer.subscription.updated", ev.Type)
	require.Equal(t, "subscription", ev.ResourceType)
	require.Equal(t, "sub_1", ev.ResourceID)
	require.Nil(t, ev.Version)
	require.Equal(t, body, ev.Payload)
	require.Equal(t, time.Unix(1700000000, 0).UTC(), ev.OccurredAt, "the provider's event time")
}

func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(subUpdated)
	// The delivery is signed with the new secret; the endpoint lists it second.
	_, err := Verifier{}.Verify(endpoint(oldSecret, secret), header(Sign(body, secret, now)), body, now)
	require.NoError(t, err)
}

func TestVerifyMultipleSignatures(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(subUpdated)
	// During a rotation on Stripe's side the header carries one v1 per secret.
	sig := func(s string) string { return hex.EncodeToString(webhook.ComputeSignature(now, body, s)) }
	h := header(fmt.Sprintf("t=%d,v1=%s,v1=%s,v0=deadbeef", now.Unix(), sig("whsec_other"), sig(secret)))
	ev, err := Verifier{}.Verify(endpoint(), h, body, now)
	require.NoError(t, err)
	require.Equal(t, "evt_1", ev.ID)
}

func TestVerifyWrongSecret(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(subUpdated)
	_, err := Verifier{}.Verify(endpoint(), header(Sign(body, "whsec_wrong", now)), body, now)
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyNoSecrets(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(subUpdated)
	ep := endpoint()
	ep.Secrets = nil
	_, err := Verifier{}.Verify(ep, header(Sign(body, secret, now)), body, now)
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyMissingHeader(t *testing.T) {
	t.Parallel()
	body := []byte(subUpdated)
	_, err := Verifier{}.Verify(endpoint(), http.Header{}, body, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyGarbageHeader(t *testing.T) {
	t.Parallel()
	body := []byte(subUpdated)
	for _, sig := range []string{"nonsense", "t=abc,v1=00", "t=1,v1=zz", "v1=" + strings.Repeat("0", 64)} {
		_, err := Verifier{}.Verify(endpoint(), header(sig), body, time.Now())
		require.Error(t, err, sig)
		require.NotErrorIs(t, err, provider.ErrMalformed, sig)
	}
}

func TestVerifyStale(t *testing.T) {
	t.Parallel()
	// stripe-go checks age against the wall clock, not the now argument.
	now := time.Now()
	body := []byte(subUpdated)
	signed := now.Add(-10 * time.Minute)
	_, err := Verifier{}.Verify(endpoint(), header(Sign(body, secret, signed)), body, now)
	require.ErrorIs(t, err, provider.ErrStaleSignature)

	// A wider tolerance admits it.
	ep := endpoint()
	ep.Tolerance = 15 * time.Minute
	_, err = Verifier{}.Verify(ep, header(Sign(body, secret, signed)), body, now)
	require.NoError(t, err)
}

// A signature from the future is refused like a stale one: a clock far ahead
// (or a captured, future-dated signature) must not widen the replay window.
func TestVerifyRefusesTimestampsFromTheFuture(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(subUpdated)
	signed := now.Add(10 * time.Minute)
	_, err := Verifier{}.Verify(endpoint(), header(Sign(body, secret, signed)), body, now)
	require.ErrorIs(t, err, provider.ErrStaleSignature)

	// Within the tolerance, clock skew is accepted.
	_, err = Verifier{}.Verify(endpoint(), header(Sign(body, secret, now.Add(time.Minute))), body, now)
	require.NoError(t, err)
	ep := endpoint()
	ep.Tolerance = 15 * time.Minute
	_, err = Verifier{}.Verify(ep, header(Sign(body, secret, signed)), body, now)
	require.NoError(t, err)
}

func TestVerifyTamperedBody(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(subUpdated)
	sig := Sign(body, secret, now)
	tampered := []byte(strings.Replace(subUpdated, "sub_1", "sub_2", 1))
	_, err := Verifier{}.Verify(endpoint(), header(sig), tampered, now)
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, body := range []string{`{"id":`, `not json`, `{}`, `{"id":"evt_1"}`, `[1,2]`} {
		_, err := Verifier{}.Verify(endpoint(), header(Sign([]byte(body), secret, now)), []byte(body), now)
		require.ErrorIs(t, err, provider.ErrMalformed, body)
	}
}

func TestVerifyLivemodeMismatch(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := []byte(strings.Replace(subUpdated, `"livemode":false`, `"livemode":true`, 1))
	_, err := Verifier{}.Verify(endpoint(), header(Sign(body, secret, now)), body, now)
	require.ErrorIs(t, err, provider.ErrScope)

	// The same event is in scope on a live endpoint.
	ep := endpoint()
	ep.Environment = "live"
	_, err = Verifier{}.Verify(ep, header(Sign(body, secret, now)), body, now)
	require.NoError(t, err)

	// And a test event is out of scope there.
	test := []byte(subUpdated)
	_, err = Verifier{}.Verify(ep, header(Sign(test, secret, now)), test, now)
	require.ErrorIs(t, err, provider.ErrScope)
}

func TestVerifyConnectAccount(t *testing.T) {
	t.Parallel()
	now := time.Now()
	other := []byte(strings.Replace(subUpdated, `"livemode":false`, `"livemode":false,"account":"acct_other"`, 1))
	_, err := Verifier{}.Verify(endpoint(), header(Sign(other, secret, now)), other, now)
	require.ErrorIs(t, err, provider.ErrScope)

	own := []byte(strings.Replace(subUpdated, `"livemode":false`, `"livemode":false,"account":"acct_owner"`, 1))
	_, err = Verifier{}.Verify(endpoint(), header(Sign(own, secret, now)), own, now)
	require.NoError(t, err)
}

func TestResourceMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, body, typ, id string
	}{
		{
			"invoice with subscription id",
			`{"id":"evt_2","type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice","subscription":"sub_9"}}}`,
			"subscription", "sub_9",
		},
		{
			"invoice with expanded subscription",
			`{"id":"evt_3","type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice","subscription":{"id":"sub_8","object":"subscription"}}}}`,
			"subscription", "sub_8",
		},
		{
			"invoice with parent subscription details",
			`{"id":"evt_4","type":"invoice.paid","data":{"object":{"id":"in_1","object":"invoice","parent":{"subscription_details":{"subscription":"sub_7"}}}}}`,
			"subscription", "sub_7",
		},
		{
			"invoice without subscription",
			`{"id":"evt_5","type":"invoice.created","data":{"object":{"id":"in_2","object":"invoice","subscription":null}}}`,
			"invoice", "in_2",
		},
		{
			"other object",
			`{"id":"evt_6","type":"customer.created","data":{"object":{"id":"cus_1","object":"customer"}}}`,
			"customer", "cus_1",
		},
		{
			"no object",
			`{"id":"evt_7","type":"balance.available","data":{"object":{"object":"balance"}}}`,
			"", "",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			body := []byte(c.body)
			ev, err := Verifier{}.Verify(endpoint(), header(Sign(body, secret, now)), body, now)
			require.NoError(t, err)
			require.Equal(t, c.typ, ev.ResourceType)
			require.Equal(t, c.id, ev.ResourceID)
		})
	}
}

func TestSignMatchesLibrary(t *testing.T) {
	t.Parallel()
	ts := time.Unix(1700000000, 0)
	body := []byte(subUpdated)
	want := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: ts}).Header
	require.Equal(t, want, Sign(body, secret, ts))
	require.True(t, strings.HasPrefix(want, "t=1700000000,v1="))
}

// signedBy reports whether sig carries a v1 signature of body by s, reading
// the header the way Stripe defines it: the last t wins, v1 entries are hex.
func signedBy(sig string, body []byte, s string) bool {
	var ts int64
	var sigs [][]byte
	for pair := range strings.SplitSeq(sig, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			ts, _ = strconv.ParseInt(v, 10, 64)
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	want := webhook.ComputeSignature(time.Unix(ts, 0), body, s)
	for _, b := range sigs {
		if string(b) == string(want) {
			return true
		}
	}
	return false
}

func FuzzVerify(f *testing.F) {
	now := time.Now()
	for _, body := range []string{subUpdated, `{}`, `not json`, ``, `{"id":"evt","type":"x","livemode":true}`} {
		f.Add([]byte(body), Sign([]byte(body), secret, now))
		f.Add([]byte(body), Sign([]byte(body), "whsec_wrong", now))
	}
	f.Add([]byte(subUpdated), "")
	f.Add([]byte(subUpdated), "t=,v1=")
	f.Add([]byte(subUpdated), "t=1,v1=00,v1=zz,=,,")
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		ep := endpoint()
		ev, err := Verifier{}.Verify(ep, header(sig), body, time.Now())
		if err != nil {
			return
		}
		require.True(t, signedBy(sig, body, secret), "accepted without a valid signature: %q", sig)
		require.NotEmpty(t, ev.ID)
		require.NotEmpty(t, ev.Type)
	})
}

// FuzzParse signs whatever body it gets, so the reading after verification is
// fuzzed too: it must never panic and may refuse only as malformed or out of
// scope.
func FuzzParse(f *testing.F) {
	f.Add([]byte(subUpdated))
	f.Add([]byte(`{"id":"e","type":"invoice.paid","data":{"object":{"id":"in","object":"invoice","subscription":{"id":7}}}}`))
	f.Add([]byte(`{"id":"e","type":"t","account":"acct_other","livemode":true}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		now := time.Now()
		ev, err := Verifier{}.Verify(endpoint(), header(Sign(body, secret, now)), body, now)
		if err != nil {
			if !errors.Is(err, provider.ErrScope) {
				require.ErrorIs(t, err, provider.ErrMalformed)
			}
			return
		}
		require.NotEmpty(t, ev.ID)
		require.NotEmpty(t, ev.Type)
	})
}
