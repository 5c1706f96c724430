package audit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// A record says who, what, when, which identity or filter and how many
// rows; the list is newest first and bounded by since and limit.
func TestAuditRecordsWhoWhatWhenWhichAndHowMany(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	k := map[string]string{"provider": "stripe", "source_account": "acct", "environment": "test", "event_id": "evt_1"}
	require.NoError(t, audit.Record(ctx, s.Pool, "support", audit.ActionPayloadRead, k, 1))
	require.NoError(t, audit.Record(ctx, s.Pool, "cli:alice", audit.ActionReplayDead, map[string]any{"since": "6h", "limit": 500}, 42))

	got, err := audit.List(ctx, s.Pool, time.Time{}, 10)
	require.NoError(t, err)
	require.Len(t, got, 2)
	require.Equal(t, "cli:alice", got[0].Actor)
	require.Equal(t, audit.ActionReplayDead, got[0].Action)
	require.EqualValues(t, 42, got[0].Rows)
	require.JSONEq(t, `{"since":"6h","limit":500}`, string(got[0].Target))
	require.Equal(t, "support", got[1].Actor)
	require.JSONEq(t, `{"provider":"stripe","source_account":"acct","environment":"test","event_id":"evt_1"}`, string(got[1].Target))
	require.WithinDuration(t, time.Now(), got[1].RecordedAt, time.Hour)

	got, err = audit.List(ctx, s.Pool, time.Time{}, 1)
	require.NoError(t, err)
	require.Len(t, got, 1)
	got, err = audit.List(ctx, s.Pool, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	require.Empty(t, got)
}

// The audit is kept for its own retention: a purge deletes records older
// than the cutoff, in chunks, and keeps the younger ones.
func TestAuditIsPurgedAfterItsOwnRetention(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	_, err := s.Pool.Exec(ctx, `INSERT INTO ops_audit (actor, action, recorded_at)
SELECT 'x', 'purge', now() - interval '500 days' FROM generate_series(1, $1)`, audit.PurgeChunk+7)
	require.NoError(t, err)
	require.NoError(t, audit.Record(ctx, s.Pool, "y", audit.ActionPurge, nil, 0))

	n, err := audit.Purge(ctx, s.Pool, time.Now().Add(-400*24*time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, audit.PurgeChunk+7, n)
	left, err := audit.List(ctx, s.Pool, time.Time{}, 10)
	require.NoError(t, err)
	require.Len(t, left, 1)
	require.Equal(t, "y", left[0].Actor)
}
