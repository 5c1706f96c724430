package stripe_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/stripe"
)

// A 429 or 503 carrying Retry-After (RFC 9110 §10.2.3, in seconds) says when
// to try again; the error exposes it, so the caller's retry waits at least
// that long. Stripe documents no Retry-After on its 429s (it asks for
// exponential backoff: https://docs.stripe.com/rate-limits), so without the
// header there is none. Fails if the header is dropped.
func TestRetryAfterOfARefusalIsExposed(t *testing.T) {
	t.Parallel()
	status, retryAfter := http.StatusTooManyRequests, "120"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"error":{"type":"rate_limit_error","message":"slow down"}}`))
	}))
	defer srv.Close()
	c := stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, BreakerFailures: 100}, nil)

	_, err := c.Get(context.Background(), "", "subscription", "sub_1")
	require.ErrorIs(t, err, stripe.ErrRateLimited)
	var ra interface{ RetryAfter() time.Duration }
	require.True(t, errors.As(err, &ra))
	require.Equal(t, 120*time.Second, ra.RetryAfter())

	status = http.StatusServiceUnavailable
	_, err = c.Get(context.Background(), "", "subscription", "sub_1")
	require.ErrorIs(t, err, stripe.ErrServer)
	require.True(t, errors.As(err, &ra))
	require.Equal(t, 120*time.Second, ra.RetryAfter())

	status, retryAfter = http.StatusTooManyRequests, ""
	_, err = c.Get(context.Background(), "", "subscription", "sub_1")
	require.True(t, errors.As(err, &ra))
	require.Zero(t, ra.RetryAfter())
}
