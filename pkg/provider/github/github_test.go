package github

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

const secret = "It's a Secret to Everybody"

func endpoint(secrets ...string) *provider.Endpoint {
	if len(secrets) == 0 {
		secrets = []string{secret}
	}
	return &provider.Endpoint{
		ID: "ep_gh", Provider: provider.GitHub, SourceAccount: "hookyard",
		Environment: "live", Secrets: secrets,
	}
}

func headers(sig, event string) http.Header {
	h := http.Header{}
	if sig != "" {
		h.Set(SignatureHeader, sig)
	}
	h.Set(DeliveryHeader, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	if event != "" {
		h.Set(EventHeader, event)
	}
	return h
}

const issueOpened = `{"action":"opened","issue":{"number":1},
"repository":{"id":1296269,"full_name":"octocat/Hello-World"},
"organization":{"login":"octocat"},"sender":{"login":"octocat"}}`

// GitHub's documented test vector, from "Validating webhook deliveries".
func TestSignDocumentedVector(t *testing.T) {
	t.Parallel()
	require.Equal(t,
		"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
		Sign([]byte("Hello, World!"), "It's a Secret to Everybody"))
}

func TestVerifyDocumentedVectorPassesSignature(t *testing.T) {
	t.Parallel()
	// The signature is GitHub's own; the body is not JSON, so the delivery
	// gets past authentication and is refused as malformed.
	sig := "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	_, err := Verifier{}.Verify(endpoint(), headers(sig, "push"), []byte("Hello, World!"), time.Now())
	require.ErrorIs(t, err, provider.ErrMalformed)
	require.NotErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyValid(t *testing.T) {
	t.Parallel()
	body := []byte(issueOpened)
	ev, err := Verifier{}.Verify(endpoint(), headers(Sign(body, secret), "issues"), body, time.Now())
	require.NoError(t, err)
	require.Equal(t, "72d3162e-cc78-11e3-81ab-4c9367dc0958", ev.ID)
	require.Equal(t, "issues.opened", ev.Type)
	require.Equal(t, "repository", ev.ResourceType)
	require.Equal(t, "1296269", ev.ResourceID, "keyed by the repository's id, which a rename keeps")
	require.Nil(t, ev.Version)
	require.Equal(t, body, ev.Payload)
}

func TestVerifyTypeAndResource(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, event, body, typ, rtype, rid string
	}{
		{"no action", "push", `{"ref":"refs/heads/main","repository":{"id":7,"full_name":"o/r"}}`, "push", "repository", "7"},
		{"organization only", "organization", `{"action":"member_added","organization":{"id":4,"login":"acme"}}`, "organization.member_added", "organization", "4"},
		{"repository before organization", "issues", `{"action":"opened","repository":{"id":7,"full_name":"o/r"},"organization":{"id":4,"login":"o"},"installation":{"id":9}}`, "issues.opened", "repository", "7"},
		{"installation only", "installation", `{"action":"created","installation":{"id":9,"account":{"login":"someone"}}}`, "installation.created", "installation", "9"},
		{"organization before installation", "membership", `{"action":"added","organization":{"id":4,"login":"acme"},"installation":{"id":9}}`, "membership.added", "organization", "4"},
		{"no resource", "ping", `{"zen":"Keep it logically awesome.","hook_id":1}`, "ping", "", ""},
		{"empty action", "push", `{"action":"","repository":{"id":7,"full_name":"o/r"}}`, "push", "repository", "7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			body := []byte(c.body)
			ev, err := Verifier{}.Verify(endpoint(), headers(Sign(body, secret), c.event), body, time.Now())
			require.NoError(t, err)
			require.Equal(t, c.typ, ev.Type)
			require.Equal(t, c.rtype, ev.ResourceType)
			require.Equal(t, c.rid, ev.ResourceID)
		})
	}
}

func TestVerifyRotation(t *testing.T) {
	t.Parallel()
	body := []byte(issueOpened)
	_, err := Verifier{}.Verify(endpoint("previous secret", secret), headers(Sign(body, secret), "issues"), body, time.Now())
	require.NoError(t, err)
}

func TestVerifyWrongSecret(t *testing.T) {
	t.Parallel()
	body := []byte(issueOpened)
	_, err := Verifier{}.Verify(endpoint(), headers(Sign(body, "wrong"), "issues"), body, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyEmptySecretNeverMatches(t *testing.T) {
	t.Parallel()
	body := []byte(issueOpened)
	_, err := Verifier{}.Verify(endpoint(""), headers(Sign(body, ""), "issues"), body, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)

	none := endpoint()
	none.Secrets = nil
	_, err = Verifier{}.Verify(none, headers(Sign(body, secret), "issues"), body, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyMissingOrBadSignature(t *testing.T) {
	t.Parallel()
	body := []byte(issueOpened)
	good := Sign(body, secret)
	for _, sig := range []string{
		"",
		strings.TrimPrefix(good, "sha256="),
		"sha1=" + strings.TrimPrefix(good, "sha256="),
		strings.ToUpper(good),
		good + "00",
		good[:len(good)-2],
	} {
		_, err := Verifier{}.Verify(endpoint(), headers(sig, "issues"), body, time.Now())
		require.ErrorIs(t, err, provider.ErrUnauthenticated, sig)
	}
}

func TestVerifyTamperedBody(t *testing.T) {
	t.Parallel()
	body := []byte(issueOpened)
	sig := Sign(body, secret)
	tampered := []byte(strings.Replace(issueOpened, "Hello-World", "Goodbye", 1))
	_, err := Verifier{}.Verify(endpoint(), headers(sig, "issues"), tampered, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"action":`, `not json`, ``, `null`, `[]`, `"x"`, `{"action":1}`, `{"repository":"o/r"}`} {
		b := []byte(body)
		_, err := Verifier{}.Verify(endpoint(), headers(Sign(b, secret), "issues"), b, time.Now())
		require.ErrorIs(t, err, provider.ErrMalformed, body)
	}
}

func TestVerifyMissingDeliveryHeaders(t *testing.T) {
	t.Parallel()
	body := []byte(issueOpened)
	sig := Sign(body, secret)

	_, err := Verifier{}.Verify(endpoint(), headers(sig, ""), body, time.Now())
	require.ErrorIs(t, err, provider.ErrMalformed)

	h := headers(sig, "issues")
	h.Del(DeliveryHeader)
	_, err = Verifier{}.Verify(endpoint(), h, body, time.Now())
	require.ErrorIs(t, err, provider.ErrMalformed)
}

func FuzzVerify(f *testing.F) {
	for _, body := range []string{issueOpened, `{}`, `Hello, World!`, ``, `{"action":"x","organization":{"id":1,"login":"o"}}`} {
		f.Add([]byte(body), Sign([]byte(body), secret))
		f.Add([]byte(body), Sign([]byte(body), "wrong"))
	}
	f.Add([]byte(issueOpened), "")
	f.Add([]byte(issueOpened), "sha256=")
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		h := headers("", "issues")
		h[SignatureHeader] = []string{sig}
		ev, err := Verifier{}.Verify(endpoint(), h, body, time.Now())
		if err != nil {
			return
		}
		require.Equal(t, Sign(body, secret), sig, "accepted without a valid signature")
		require.NotEmpty(t, ev.ID)
		require.True(t, strings.HasPrefix(ev.Type, "issues"))
	})
}

// FuzzParse signs whatever body it gets, so the reading after verification is
// fuzzed too: it must never panic and may refuse only as malformed.
func FuzzParse(f *testing.F) {
	f.Add([]byte(issueOpened), "issues")
	f.Add([]byte(`{"repository":null,"organization":{"login":1}}`), "push")
	f.Add([]byte(`Hello, World!`), "")
	f.Fuzz(func(t *testing.T, body []byte, event string) {
		h := headers(Sign(body, secret), "")
		h[EventHeader] = []string{event}
		ev, err := Verifier{}.Verify(endpoint(), h, body, time.Now())
		if err != nil {
			require.ErrorIs(t, err, provider.ErrMalformed)
			return
		}
		require.NotEmpty(t, ev.ID)
		require.True(t, strings.HasPrefix(ev.Type, event))
		require.Equal(t, ev.ResourceType == "", ev.ResourceID == "")
	})
}

// GitHub keeps a repository's id through a rename or a transfer; its
// full_name changes ("Renaming a repository", "Transferring a repository":
// https://docs.github.com/en/repositories/creating-and-managing-repositories/renaming-a-repository,
// https://docs.github.com/en/repositories/creating-and-managing-repositories/transferring-a-repository).
// Fails if events are keyed by full_name: one repository's events would
// land under two keys, two Kafka partitions and two fences.
func TestRenamedRepositoryKeepsOneResourceKey(t *testing.T) {
	t.Parallel()
	before := []byte(`{"action":"opened","repository":{"id":1296269,"full_name":"octocat/Hello-World"},"organization":{"id":9919,"login":"octocat"}}`)
	after := []byte(`{"action":"closed","repository":{"id":1296269,"full_name":"octo-org/Hello-Universe"},"organization":{"id":4242,"login":"octo-org"}}`)
	a, err := Verifier{}.Verify(endpoint(), headers(Sign(before, secret), "issues"), before, time.Now())
	require.NoError(t, err)
	b, err := Verifier{}.Verify(endpoint(), headers(Sign(after, secret), "issues"), after, time.Now())
	require.NoError(t, err)
	require.Equal(t, [2]string{"repository", "1296269"}, [2]string{a.ResourceType, a.ResourceID})
	require.Equal(t, [2]string{a.ResourceType, a.ResourceID}, [2]string{b.ResourceType, b.ResourceID})
}
