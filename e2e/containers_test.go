package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/containertest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
)

// The promise against a real PostgreSQL and a real Kafka broker in Docker.
// Skipped, with a message, where no Docker engine runs; the same scenario runs
// against local Postgres and kfake in TestLateActiveEventNeverReopensAccess.
func TestLateActiveEventNeverReopensAccessOnRealServers(t *testing.T) {
	if testing.Short() {
		t.Skip("containers: skipped in -short")
	}
	containertest.RequireDocker(t)
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{DatabaseURL: containertest.Postgres(t), Brokers: containertest.Kafka(t)})
	ctx := context.Background()

	active := sub("sub_real", "active")
	p.Sim.Put(active)
	_, lateActive := p.Sim.Event("customer.subscription.updated", active)
	canceled := active
	canceled.Status, canceled.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(canceled)
	_, code, err := p.Sim.Send(ctx, "customer.subscription.deleted", canceled)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	p.WaitIdle()
	require.Equal(t, http.StatusOK, postStripe(p, lateActive))
	p.WaitIdle()
	d, _ := p.Access("sub_real")
	require.False(t, d.Access)
}
