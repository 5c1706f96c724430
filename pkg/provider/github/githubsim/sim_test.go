package githubsim_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
)

// The simulated hook behaves like GitHub's where integrations trip: it
// never redelivers by itself, deliveries page by cursor through the Link
// header, newest first, a redelivery is accepted with 202 and then sent
// under the original guid with a new id, and a wrong token is a 401.
// Fails if the client or the simulator page by number, or a redelivery
// gets a new guid.
func TestSimulatedHookListsAndRedeliversLikeGitHub(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get(github.DeliveryHeader))
		n := len(got)
		mu.Unlock()
		if n == 2 {
			w.WriteHeader(http.StatusServiceUnavailable) // the second delivery fails
		}
	}))
	t.Cleanup(rcv.Close)
	sim := githubsim.New(githubsim.Config{WebhookURL: rcv.URL, Secret: "s", Repo: "o/r", HookID: 5, Token: "tok"})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	var guids []string
	for range 3 {
		g, _, err := sim.Send(ctx, "push", map[string]any{"ref": "x"})
		require.NoError(t, err)
		guids = append(guids, g)
	}
	c, err := github.NewClient(github.APIConfig{BaseURL: srv.URL, RatePerSecond: 100, Burst: 10}, sim.Hook(), nil)
	require.NoError(t, err)
	var ds []github.Delivery
	cursor := ""
	for {
		page, next, err := c.ListDeliveries(ctx, cursor, 1)
		require.NoError(t, err)
		require.LessOrEqual(t, len(page), 1)
		ds = append(ds, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, ds, 3)
	require.Equal(t, []string{guids[2], guids[1], guids[0]}, []string{ds[0].GUID, ds[1].GUID, ds[2].GUID}, "newest first")
	require.Equal(t, http.StatusServiceUnavailable, ds[1].StatusCode)
	require.Zero(t, sim.Redeliveries(guids[1]), "GitHub never redelivers by itself")

	require.NoError(t, c.Redeliver(ctx, ds[1].ID))
	sim.Wait()
	page, _, err := c.ListDeliveries(ctx, "", 1)
	require.NoError(t, err)
	require.Equal(t, guids[1], page[0].GUID, "a redelivery keeps the guid")
	require.True(t, page[0].Redelivery)
	require.NotEqual(t, ds[1].ID, page[0].ID)
	require.Equal(t, http.StatusOK, page[0].StatusCode)

	// Past GitHub's 3 days a delivery is neither listed nor redelivered:
	// 422 Validation Failed, GitHub's documented refusal; an id it never
	// had is a 404.
	sim.Backdate(githubsim.DeliveryRetention + time.Hour)
	require.ErrorIs(t, c.Redeliver(ctx, page[0].ID), github.ErrUnprocessable)
	require.ErrorIs(t, c.Redeliver(ctx, 999999), github.ErrNotFound)
	page, _, err = c.ListDeliveries(ctx, "", 10)
	require.NoError(t, err)
	require.Empty(t, page)

	bad, err := github.NewClient(github.APIConfig{BaseURL: srv.URL, RatePerSecond: 100}, github.Hook{Repo: "o/r", HookID: 5, Token: "wrong"}, nil)
	require.NoError(t, err)
	_, _, err = bad.ListDeliveries(ctx, "", 10)
	require.ErrorIs(t, err, github.ErrUnauthorized)
}

// A GitHub App's webhook is listed and redelivered at /app/hook/deliveries
// with a token the App signs (RS256, iss the App id, exp at most 10
// minutes ahead), as GitHub documents; a personal token, a token signed by
// another key, naming another App, or expiring too far ahead is a 401.
// Fails if the client sends the App's token wrongly or the simulator takes
// any bearer.
func TestAppHookIsReadWithTheAppsSignedToken(t *testing.T) {
	t.Parallel()
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable) // every delivery fails
	}))
	t.Cleanup(rcv.Close)
	sim := githubsim.New(githubsim.Config{WebhookURL: rcv.URL, Secret: "s", AppID: "123456", AppClientID: "Iv1.abc"})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	guid, _, err := sim.Send(ctx, "installation", map[string]any{"action": "created"})
	require.NoError(t, err)

	h := sim.Hook()
	require.Equal(t, "123456", h.AppID)
	c, err := github.NewClient(github.APIConfig{BaseURL: srv.URL, RatePerSecond: 100, Burst: 10}, h, nil)
	require.NoError(t, err)
	ds, _, err := c.ListDeliveries(ctx, "", 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, guid, ds[0].GUID)
	require.NoError(t, c.Redeliver(ctx, ds[0].ID))
	sim.Wait()
	require.Equal(t, 1, sim.Redeliveries(guid))

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	otherPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)}))
	key, err := github.ParseAppKey(h.PrivateKey)
	require.NoError(t, err)
	get := func(auth string) int {
		req, err := http.NewRequest(http.MethodGet, srv.URL+github.AppHookPath, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", auth)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	good, err := github.AppJWT(key, "123456", time.Now())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, get("Bearer "+good))
	byClientID, err := github.AppJWT(key, "Iv1.abc", time.Now())
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, get("Bearer "+byClientID), "GitHub takes the client id as issuer too")
	forged, err := github.AppJWT(other, "123456", time.Now())
	require.NoError(t, err)
	otherApp, err := github.AppJWT(key, "999", time.Now())
	require.NoError(t, err)
	expired, err := github.AppJWT(key, "123456", time.Now().Add(-time.Hour))
	require.NoError(t, err)
	tooLong, err := github.AppJWT(key, "123456", time.Now().Add(5*time.Minute)) // exp 14 min ahead
	require.NoError(t, err)
	for name, auth := range map[string]string{"personal token": "Bearer " + githubsim.DevToken, "other key": "Bearer " + forged,
		"other app": "Bearer " + otherApp, "expired": "Bearer " + expired, "exp too far ahead": "Bearer " + tooLong, "none": ""} {
		require.Equal(t, http.StatusUnauthorized, get(auth), name)
	}

	bad, err := github.NewClient(github.APIConfig{BaseURL: srv.URL, RatePerSecond: 100}, github.Hook{AppID: "123456", PrivateKey: otherPEM}, nil)
	require.NoError(t, err)
	_, _, err = bad.ListDeliveries(ctx, "", 10)
	require.ErrorIs(t, err, github.ErrUnauthorized)
}

// An App's hook is named by app_id and private_key only; a key that is not
// an RSA private key in PEM is refused without printing it.
func TestAppHookConfigIsChecked(t *testing.T) {
	t.Parallel()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
	der, err := x509.MarshalPKCS8PrivateKey(k)
	require.NoError(t, err)
	pkcs8 := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	oneLine := strings.ReplaceAll(pkcs1, "\n", `\n`)
	folded := strings.ReplaceAll(pkcs1, "\n", " ")
	for _, key := range []string{pkcs1, pkcs8, oneLine, folded} {
		_, err := github.ParseAppKey(key)
		require.NoError(t, err)
		p, err := github.HookPath(github.Hook{AppID: "1", PrivateKey: key})
		require.NoError(t, err)
		require.Equal(t, "/app/hook/deliveries", p)
	}
	for name, h := range map[string]github.Hook{
		"with repo":    {AppID: "1", PrivateKey: pkcs1, Repo: "o/r"},
		"with hook id": {AppID: "1", PrivateKey: pkcs1, HookID: 3},
		"with token":   {AppID: "1", PrivateKey: pkcs1, Token: "t"},
		"no key":       {AppID: "1"},
		"key, no app":  {Repo: "o/r", HookID: 3, PrivateKey: pkcs1},
	} {
		_, err := github.HookPath(h)
		require.Error(t, err, name)
	}
	secret := "-----BEGIN RSA PRIVATE KEY-----\nbm90IGEga2V5\n-----END RSA PRIVATE KEY-----\n"
	_, err = github.ParseAppKey(secret)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "bm90IGEga2V5")
	_, err = github.ParseAppKey("${GITHUB_APP_KEY}")
	require.ErrorContains(t, err, "not PEM")
}
