package standardwebhooks

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	swh "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// signV1a signs body per the specification's asymmetric scheme: ed25519
// over "{msg_id}.{timestamp}.{payload}", sent as "v1a," + base64 of the
// signature; the public key is given to consumers as "whpk_" + base64
// (https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#signature-scheme).
func signV1a(priv ed25519.PrivateKey, id string, ts time.Time, body string) string {
	sig := ed25519.Sign(priv, []byte(fmt.Sprintf("%s.%d.%s", id, ts.Unix(), body)))
	return "v1a," + base64.StdEncoding.EncodeToString(sig)
}

func newKeyPair(t *testing.T) (string, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return "whpk_" + base64.StdEncoding.EncodeToString(pub), priv
}

func v1aHeaders(id string, ts time.Time, sig string) http.Header {
	h := http.Header{}
	h.Set(IDHeader, id)
	h.Set(TimestampHeader, strconv.FormatInt(ts.Unix(), 10))
	h.Set(SignatureHeader, sig)
	return h
}

// A sender that signs asymmetrically (v1a, ed25519) is verified against the
// endpoint's whpk_ public keys, among the other signatures of the header.
// Fails if v1a signatures are ignored, or a whpk_ key is read as an HMAC
// secret.
func TestAsymmetricSignatureVerifiesAgainstTheEndpointsPublicKey(t *testing.T) {
	t.Parallel()
	pk, priv := newKeyPair(t)
	now := time.Now()
	sig := signV1a(priv, msgID, now, subUpdated)

	ev, err := Verifier{}.Verify(endpoint(pk), v1aHeaders(msgID, now, sig), []byte(subUpdated), now)
	require.NoError(t, err)
	require.Equal(t, "sub_1", ev.ResourceID)

	// Several signatures, space-separated, of both kinds (the spec's own
	// example header): the valid v1a one is found among them.
	mixed := "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4= " + sig
	_, err = Verifier{}.Verify(endpoint(secret, pk), v1aHeaders(msgID, now, mixed), []byte(subUpdated), now)
	require.NoError(t, err)

	// A v1 signature by the endpoint's secret beside a v1a by a stranger.
	lib, err := swh.NewWebhook(secret)
	require.NoError(t, err)
	v1, err := lib.Sign(msgID, now, []byte(subUpdated))
	require.NoError(t, err)
	_, stranger := newKeyPair(t)
	both := signV1a(stranger, msgID, now, subUpdated) + " " + v1
	_, err = Verifier{}.Verify(endpoint(pk, secret), v1aHeaders(msgID, now, both), []byte(subUpdated), now)
	require.NoError(t, err)
}

func TestAsymmetricSignatureRefusals(t *testing.T) {
	t.Parallel()
	pk, priv := newKeyPair(t)
	other, _ := newKeyPair(t)
	now := time.Now()
	sig := signV1a(priv, msgID, now, subUpdated)

	cases := map[string]struct {
		ep   *provider.Endpoint
		h    http.Header
		body string
		want error
	}{
		"another public key":         {endpoint(other), v1aHeaders(msgID, now, sig), subUpdated, provider.ErrUnauthenticated},
		"an HMAC secret only":        {endpoint(secret), v1aHeaders(msgID, now, sig), subUpdated, provider.ErrUnauthenticated},
		"tampered body":              {endpoint(pk), v1aHeaders(msgID, now, sig), strings.Replace(subUpdated, "sub_1", "sub_2", 1), provider.ErrUnauthenticated},
		"another message id":         {endpoint(pk), v1aHeaders("msg_other", now, sig), subUpdated, provider.ErrUnauthenticated},
		"signature sent as v1":       {endpoint(pk), v1aHeaders(msgID, now, "v1,"+strings.TrimPrefix(sig, "v1a,")), subUpdated, provider.ErrUnauthenticated},
		"not base64":                 {endpoint(pk), v1aHeaders(msgID, now, "v1a,%%%"), subUpdated, provider.ErrUnauthenticated},
		"stale, signed":              {endpoint(pk), v1aHeaders(msgID, now.Add(-time.Hour), signV1a(priv, msgID, now.Add(-time.Hour), subUpdated)), subUpdated, provider.ErrStaleSignature},
		"stale and forged is forged": {endpoint(other), v1aHeaders(msgID, now.Add(-time.Hour), signV1a(priv, msgID, now.Add(-time.Hour), subUpdated)), subUpdated, provider.ErrUnauthenticated},
	}
	for name, c := range cases {
		_, err := Verifier{}.Verify(c.ep, c.h, []byte(c.body), now)
		require.ErrorIs(t, err, c.want, name)
	}
}

// The Python library pads the key before decoding ("add padding in case
// whsecret is unpadded base64"), and Ruby's and PHP's decoders need no
// padding, so a whsec_ key copied without its trailing "=" works with
// them; the Go library (base64.StdEncoding) refuses it. hookyard accepts
// it. Fails if an unpadded key is skipped as undecodable.
func TestUnpaddedSecretVerifiesLikeThePaddedOne(t *testing.T) {
	t.Parallel()
	padded := "whsec_" + base64.StdEncoding.EncodeToString([]byte("a 32-byte key, ends in one pad!!"))
	require.True(t, strings.HasSuffix(padded, "="))
	unpadded := strings.TrimRight(padded, "=")
	now := time.Now()
	h := sign(t, padded, now, subUpdated) // the official library signs with the padded form
	_, err := Verifier{}.Verify(endpoint(unpadded), h, []byte(subUpdated), now)
	require.NoError(t, err)
}

// Every secret the verifier cannot use is refused at start, by the
// provider's endpoint check, naming the secret: a whpk_ key that is not an
// ed25519 public key, a whsk_ private key, a key that is not base64.
// Fails if such a key loads and every delivery then fails.
func TestKeysTheVerifierCannotUseAreRefusedByTheEndpointCheck(t *testing.T) {
	t.Parallel()
	pk, _ := newKeyPair(t)
	unpadded := strings.TrimRight("whsec_"+base64.StdEncoding.EncodeToString([]byte("a 32-byte key, ends in one pad!!")), "=")
	good := endpoint(secret, unpadded, pk, strings.TrimPrefix(secret, "whsec_"))
	require.Empty(t, CheckSecrets(good))
	require.Empty(t, provider.EndpointChecker(Provider{}).CheckEndpoint(good), "the provider's endpoint check runs CheckSecrets")

	bad := endpoint(secret,
		"whpk_"+base64.StdEncoding.EncodeToString([]byte("sixteen byte key")),
		"whsk_"+base64.StdEncoding.EncodeToString(make([]byte, 64)),
		"whsec_%%%",
		"whsec_",
		"whpk_not base64",
	)
	errs := provider.EndpointChecker(Provider{}).CheckEndpoint(bad)
	require.Len(t, errs, 5, "%v", errs)
	for i, err := range errs {
		require.True(t, strings.HasPrefix(err.Error(), fmt.Sprintf("secrets[%d] ", i+1)), err.Error())
		require.NotContains(t, err.Error(), "sixteen", "a secret is never echoed")
	}
}
