package standardwebhooks

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// fetchEndpoint is a Standard Webhooks endpoint of account acct whose
// fetch API is base + "/v1/{type}s/{id}" with the token in env.
func fetchEndpoint(id, acct, base, env string, rate float64, burst int) provider.Endpoint {
	return provider.Endpoint{ID: id, Provider: provider.StandardWebhooks, SourceAccount: acct, Environment: "test",
		Fetch: &provider.FetchAPI{URL: base + "/v1/{type}s/{id}", TokenEnv: env, Rate: rate, Burst: burst}}
}

func connectFetcher(t *testing.T, eps ...provider.Endpoint) provider.Fetcher {
	t.Helper()
	conn, err := Provider{}.Connect(eps, provider.APIOptions{})
	require.NoError(t, err)
	f := conn.Fetcher()
	require.NotNil(t, f)
	return f
}

func contact(acct, id string) message.Resource {
	return message.Resource{Provider: provider.StandardWebhooks, SourceAccount: acct, Environment: "test", Type: "contact", ID: id}
}

// The fetcher reads the resource at its own address with the token, takes
// status and deletion from the answer, and a 404 is ErrNotFound, never a
// deletion. Fails if 404 were read as deleted, or the deleted field ignored.
func TestFetchReadsStateAndNeverDeletesOn404(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-1" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/contacts/c 1":
			_, _ = w.Write([]byte(`{"id":"c 1","status":"active","name":"x"}`))
		case "/v1/contacts/gone":
			_, _ = w.Write([]byte(`{"id":"gone","deleted":true}`))
		case "/v1/contacts/other":
			_, _ = w.Write([]byte(`{"id":"c 1","status":"active"}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("SENDER_TOKEN_A", "tok-1")
	f := connectFetcher(t, fetchEndpoint("e", "acct", srv.URL, "SENDER_TOKEN_A", 100, 10))

	got, err := f.Fetch(context.Background(), contact("acct", "c 1"))
	require.NoError(t, err)
	require.Equal(t, "active", got.Status)
	require.False(t, got.Deleted)
	require.JSONEq(t, `{"id":"c 1","status":"active","name":"x"}`, string(got.State))

	got, err = f.Fetch(context.Background(), contact("acct", "gone"))
	require.NoError(t, err)
	require.True(t, got.Deleted)

	got, err = f.Fetch(context.Background(), contact("acct", "missing"))
	require.ErrorIs(t, err, provider.ErrNotFound)
	require.False(t, got.Deleted)

	_, err = f.Fetch(context.Background(), contact("acct", "other"))
	require.ErrorContains(t, err, "another", "an answer about another resource is never stored")

	_, err = f.Fetch(context.Background(), contact("another-acct", "c 1"))
	require.Error(t, err, "a resource of an account without a fetch API is never read with another's")
}

// One token is one quota: endpoints sharing a token_env share one limiter,
// and calls beyond its bucket never reach the sender while the rate gives
// no new token. Fails if the limiter is removed or made per endpoint.
func TestFetchLimiterHoldsTheRatePerToken(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = w.Write([]byte(`{"status":"active"}`))
	}))
	defer srv.Close()
	t.Setenv("SENDER_TOKEN_B", "tok")
	// One token per 1000 s: none is added while the test runs.
	f := connectFetcher(t, fetchEndpoint("e1", "acct1", srv.URL, "SENDER_TOKEN_B", 0.001, 3),
		fetchEndpoint("e2", "acct2", srv.URL, "SENDER_TOKEN_B", 0.001, 3))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	var ok, refused atomic.Int64
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := f.Fetch(ctx, contact([]string{"acct1", "acct2"}[i%2], "c1"))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, provider.ErrNotAttempted):
				refused.Add(1)
			default:
				t.Errorf("fetch: %v", err)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, int64(3), served.Load())
	require.Equal(t, int64(3), ok.Load())
	require.Equal(t, int64(17), refused.Load())
}

// 5xx and 429 open the breaker after five in a row; then no call reaches
// the sender and each fetch is ErrNotAttempted. A 429's Retry-After, sent
// as an HTTP-date, reaches the processor's retry. Fails if the breaker is
// removed or the date form is not read.
func TestFetchBreakerAndRetryAfter(t *testing.T) {
	var served atomic.Int64
	retryAt := time.Now().Add(time.Hour).UTC()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1)%2 == 0 {
			w.Header().Set("Retry-After", retryAt.Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	t.Setenv("SENDER_TOKEN_C", "tok")
	f := connectFetcher(t, fetchEndpoint("e", "acct", srv.URL, "SENDER_TOKEN_C", 1000, 100))
	var sawRetryAfter bool
	for range 5 {
		_, err := f.Fetch(context.Background(), contact("acct", "c1"))
		require.Error(t, err)
		require.NotErrorIs(t, err, provider.ErrNotAttempted)
		require.NotErrorIs(t, err, provider.ErrNotFound)
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) && ra.RetryAfter() > 50*time.Minute {
			sawRetryAfter = true
		}
	}
	require.True(t, sawRetryAfter, "the HTTP-date Retry-After is read")
	for range 10 {
		_, err := f.Fetch(context.Background(), contact("acct", "c1"))
		require.ErrorIs(t, err, provider.ErrNotAttempted)
	}
	require.Equal(t, int64(5), served.Load())
}

// Connect refuses what would fail every fetch: an unset token, and two
// endpoints of one account and environment reading different APIs.
func TestFetchConnectRefusesAtStart(t *testing.T) {
	_, err := Provider{}.Connect([]provider.Endpoint{fetchEndpoint("e", "acct", "https://x.example", "SENDER_TOKEN_UNSET_FOR_TEST", 0, 0)}, provider.APIOptions{})
	require.ErrorContains(t, err, "SENDER_TOKEN_UNSET_FOR_TEST is not set")

	t.Setenv("SENDER_TOKEN_D", "tok")
	_, err = Provider{}.Connect([]provider.Endpoint{fetchEndpoint("e1", "acct", "https://x.example", "SENDER_TOKEN_D", 0, 0),
		fetchEndpoint("e2", "acct", "https://y.example", "SENDER_TOKEN_D", 0, 0)}, provider.APIOptions{})
	require.ErrorContains(t, err, "fetches elsewhere")

	ep := fetchEndpoint("e", "acct", "https://x.example", "SENDER_TOKEN_D", 0, 0)
	ep.Fetch.URL = "https://x.example/v1/contacts"
	_, err = Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{})
	require.ErrorContains(t, err, "must contain {id}")

	conn, err := Provider{}.Connect([]provider.Endpoint{{ID: "plain", Provider: provider.StandardWebhooks}}, provider.APIOptions{})
	require.NoError(t, err)
	require.Nil(t, conn.Fetcher(), "no fetch API: the processor records hints")
}

func TestRetryAfterForms(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, 7*time.Second, retryAfter("7", now))
	require.Equal(t, 90*time.Second, retryAfter(now.Add(90*time.Second).Format(http.TimeFormat), now))
	require.Zero(t, retryAfter("", now))
	require.Zero(t, retryAfter("soon", now))
	require.Zero(t, retryAfter(now.Add(-time.Minute).Format(http.TimeFormat), now))
}
