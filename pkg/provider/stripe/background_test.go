package stripe_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
)

// The reconciler's reads (a Background context) share the account's quota
// with live fetches but never take more than their own smaller bucket:
// once it is spent, background calls wait while live fetches still go
// through. Fails if background calls draw on the shared bucket alone (a
// reconcile round could then take the whole quota and starve live hints).
func TestBackgroundReadsCannotStarveLiveFetches(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[],"has_more":false}`))
	}))
	t.Cleanup(srv.Close)
	c := stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: "sk_test_x", RatePerSecond: 0.001, Burst: 10,
		BackgroundRate: 0.001, BackgroundBurst: 2}, nil)

	bg := provider.Background(t.Context())
	for range 2 {
		_, _, err := c.ListObjects(bg, "", "subscription", "", 10)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(bg, time.Second)
	defer cancel()
	_, _, err := c.ListObjects(ctx, "", "subscription", "", 10)
	require.ErrorIs(t, err, stripe.ErrLimited, "the background share is spent")

	for range 8 {
		_, _, err := c.ListObjects(t.Context(), "", "subscription", "", 10)
		require.NoError(t, err, "live calls keep the rest of the shared bucket")
	}
	require.EqualValues(t, 10, c.Calls())
}
