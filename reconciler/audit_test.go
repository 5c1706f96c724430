package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/reconciler"
)

// The round's purge step keeps ops_audit to its own retention, also when
// payloads are kept forever: records older than AuditRetention go, younger
// ones stay.
func TestRoundPurgesAuditRecordsPastTheirRetention(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	_, err := p.Pool.Exec(ctx, `INSERT INTO ops_audit (actor, action, recorded_at) VALUES
        ('old', 'purge', now() - interval '401 days'), ('young', 'purge', now() - interval '399 days')`)
	require.NoError(t, err)
	r := reconciler.New(p.Pool, p.Log, reconciler.Config{AuditRetention: 400 * 24 * time.Hour, StuckAfter: time.Minute,
		Progress: groupProgress(p)})
	_, err = r.RunOnce(ctx)
	require.NoError(t, err)
	left, err := audit.List(ctx, p.Pool, time.Time{}, 10)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, "young", left[0].Actor)
}
