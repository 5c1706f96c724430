package github

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// An installation's 404 is a deletion only once GET /app confirms the JWT
// is this App's: when it answers another App (or nothing), the 404 is an
// error, never a tombstone. Fails if confirmSelf is removed or ignored.
func TestInstallationNotFoundIsADeletionOnlyForTheConfirmedApp(t *testing.T) {
	t.Parallel()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	for _, c := range []struct {
		app     string
		deleted bool
	}{
		{`{"id": 12345, "client_id": "Iv1.abc"}`, true},
		{`{"id": 999, "client_id": "Iv1.other"}`, false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/app" {
				_, _ = w.Write([]byte(c.app))
				return
			}
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"message":"Not Found"}`))
		}))
		ep := provider.Endpoint{ID: "gh", Provider: provider.GitHub, SourceAccount: "a", Environment: "e",
			Project: []string{Installation}, GitHubHook: &provider.GitHubHook{AppID: "12345", PrivateKey: pemKey}}
		conn, err := Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{BaseURL: srv.URL})
		require.NoError(t, err)
		got, err := conn.Fetcher().Fetch(t.Context(), message.Resource{Provider: provider.GitHub, SourceAccount: "a",
			Environment: "e", Type: Installation, ID: "42"})
		srv.Close()
		require.Equal(t, c.deleted, got.Deleted, c.app)
		if c.deleted {
			require.NoError(t, err)
			require.Equal(t, "deleted", got.Status)
		} else {
			require.ErrorContains(t, err, "unconfirmed")
			require.NotErrorIs(t, err, provider.ErrNotFound, "a 404 of another App's JWT is not this installation's")
		}
	}
}

// An endpoint that projects installations keys an installation's events by
// the installation, even when they also name an organization, and makes
// them hints; one that does not keys them by the organization, recorded.
// Fails if the key or the project gate is removed.
func TestInstallationEventsAreHintsOnlyWhereProjected(t *testing.T) {
	t.Parallel()
	body := []byte(`{"action":"suspend","installation":{"id":42},"organization":{"id":9919,"login":"dev-org"}}`)
	for _, c := range []struct {
		project  []string
		typ, id  string
		wantHint bool
	}{
		{nil, "organization", "9919", false},
		{[]string{Installation}, Installation, "42", true},
		{[]string{PullRequest}, "organization", "9919", false},
	} {
		ep := endpoint()
		ep.Project = c.project
		ev, err := Verifier{}.Verify(ep, headers(Sign(body, secret), "installation"), body, time.Now())
		require.NoError(t, err)
		require.Equal(t, c.typ, ev.ResourceType)
		require.Equal(t, c.id, ev.ResourceID)
		plan, err := Provider{}.Interpret(provider.StoredEvent{EventType: ev.Type, ResourceType: ev.ResourceType, ResourceID: ev.ResourceID, Payload: body}, ep)
		require.NoError(t, err)
		require.Equal(t, c.wantHint, plan.Fetch)
	}
}
