package job_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/ops/job"
)

// A purge job also applies the audit's own retention: records older than
// its audit cutoff go, younger ones stay; without one the audit is left
// alone.
func TestPurgeJobDeletesAuditRecordsPastTheirRetention(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	_, err := s.Pool.Exec(ctx, `INSERT INTO ops_audit (actor, action, recorded_at) VALUES
        ('a', 'purge', now() - interval '500 days'), ('b', 'purge', now() - interval '10 days')`)
	require.NoError(t, err)
	r := job.New(s.Pool, slog.New(slog.DiscardHandler), job.Config{Steps: map[string]job.Step{job.KindPurge: job.PurgeStep(s.Pool)}})
	count := func() int {
		got, err := audit.List(ctx, s.Pool, time.Time{}, 10)
		require.NoError(t, err)
		return len(got)
	}

	j, err := r.Start(ctx, job.KindPurge, job.PurgeParams{Cutoff: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	r.Wait()
	require.Equal(t, 2, count(), "no audit cutoff: the audit is left alone")
	require.Zero(t, j.Progress["audit_purged"])

	j, err = r.Start(ctx, job.KindPurge, job.PurgeParams{Cutoff: time.Now().Add(-time.Hour), AuditCutoff: time.Now().Add(-400 * 24 * time.Hour)})
	require.NoError(t, err)
	r.Wait()
	require.Equal(t, 1, count())
	require.EqualValues(t, 1, j.Progress["audit_purged"])
	require.Equal(t, job.StatusDone, j.Status)
}
