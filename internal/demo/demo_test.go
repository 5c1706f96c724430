package demo_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/demo"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider"
)

// The demo's claim, checked on the whole pipeline: a cancellation delivered
// before an older "active" event (and its duplicate) leaves access closed,
// where a consumer that keeps the last arrival grants it.
func TestLateActiveAfterCancellationGrantsNaiveAccessButNotHookyard(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	var out bytes.Buffer
	res, err := demo.Run(context.Background(), demo.Config{SimURL: p.SimServer.URL, ReceiverURL: p.Receiver.URL,
		OpsURL: p.Ops.URL, OpsToken: pipelinetest.OpsToken, Endpoint: p.Endpoints[0]}, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	require.True(t, res.Naive.Access, "the naive consumer keeps the late active event")
	require.False(t, res.Hookyard.Access)
	require.Equal(t, "canceled", res.Hookyard.Status)
	require.Len(t, res.Deliveries, 4)
	require.Equal(t, "accepted", res.Deliveries[2].Answer)
	require.Equal(t, "duplicate", res.Deliveries[3].Answer)
	require.Contains(t, out.String(), res.SubscriptionID)
	require.Contains(t, out.String(), "GRANTED")
	require.NotEmpty(t, res.Timeline.Entries)
}

func TestDemoNamesTheServiceThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	_, err := demo.Run(context.Background(), demo.Config{SimURL: "http://127.0.0.1:1", ReceiverURL: "http://127.0.0.1:1",
		OpsURL: "http://127.0.0.1:1", Endpoint: provider.Endpoint{ID: "stripe-dev", Provider: provider.Stripe, Secrets: []string{"whsec_x"}}}, &bytes.Buffer{})
	require.ErrorIs(t, err, demo.ErrNotRunning)
	require.ErrorContains(t, err, "Stripe simulator at http://127.0.0.1:1/sim/stats")
	require.ErrorContains(t, err, "make run")
}
