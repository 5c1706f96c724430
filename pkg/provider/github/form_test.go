package github

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// formDelivery builds a delivery the way GitHub sends one from a webhook
// whose content type is "application/x-www-form-urlencoded", GitHub's
// default: "the payload will be sent as the value of a form parameter
// called payload"
// (https://docs.github.com/en/webhooks/using-webhooks/creating-webhooks),
// and X-Hub-Signature-256 is the HMAC of the body as sent, the form
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
func formDelivery(json, secret string) ([]byte, string) {
	body := []byte(url.Values{"payload": {json}}.Encode())
	return body, Sign(body, secret)
}

func formHeaders(sig, event string) http.Header {
	h := headers(sig, event)
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return h
}

// A GitHub webhook left at its default content type delivers the JSON in
// the form's payload field, signed over the form. Fails if Verify reads the
// form body as JSON (malformed) or keeps the form as the stored payload.
func TestGitHubFormDeliveryIsVerifiedOverTheFormAndStoredAsJSON(t *testing.T) {
	t.Parallel()
	body, sig := formDelivery(issueOpened, secret)
	ev, err := Verifier{}.Verify(endpoint(), formHeaders(sig, "issues"), body, time.Now())
	require.NoError(t, err)
	require.Equal(t, "issues.opened", ev.Type)
	require.Equal(t, "repository", ev.ResourceType)
	require.JSONEq(t, issueOpened, string(ev.Payload), "the stored payload is the JSON document, not the form")
	require.True(t, ev.ValidJSON)
}

// The signature covers the form as received: a signature over the JSON
// inside it, or over a re-encoded form, does not verify.
func TestGitHubFormDeliverySignedOverAnythingButTheRawFormIsRefused(t *testing.T) {
	t.Parallel()
	body, _ := formDelivery(issueOpened, secret)
	_, err := Verifier{}.Verify(endpoint(), formHeaders(Sign([]byte(issueOpened), secret), "issues"), body, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)

	// Same form, other bytes: "%20" where the signer wrote "+".
	_, sig := formDelivery(`{"action":"opened","x":"a b"}`, secret)
	other := []byte("payload=" + url.PathEscape(`{"action":"opened","x":"a b"}`))
	_, err = Verifier{}.Verify(endpoint(), formHeaders(sig, "issues"), other, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestGitHubFormDeliveryWithoutOneJSONPayloadIsMalformed(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		"", "zen=1", "payload=" + url.QueryEscape("not json"), "payload=%zz",
		"payload=" + url.QueryEscape(issueOpened) + "&payload=" + url.QueryEscape(issueOpened),
	} {
		b := []byte(body)
		_, err := Verifier{}.Verify(endpoint(), formHeaders(Sign(b, secret), "issues"), b, time.Now())
		require.ErrorIs(t, err, provider.ErrMalformed, body)
	}
}

func TestGitHubAcceptsJSONAndFormMediaTypes(t *testing.T) {
	t.Parallel()
	require.True(t, provider.AcceptsMediaType(Provider{}, "application/json"))
	require.True(t, provider.AcceptsMediaType(Provider{}, "application/x-www-form-urlencoded"))
	require.False(t, provider.AcceptsMediaType(Provider{}, "text/plain"))
}
