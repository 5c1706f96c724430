package outboxrelay_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
)

// The relay removes the outbox's dead rows itself once they pass its
// threshold, autovacuum or not: here autovacuum is off for the outbox, as
// good as a busy autovacuum that does not come by, and after the relay
// published 5,000 rows the outbox was vacuumed and holds no dead row. Fails
// without the relay's vacuum loop.
func TestRelayVacuumsTheOutboxWhenItsDeadRowsPileUp(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	_, err := s.Pool.Exec(ctx, `ALTER TABLE outbox SET (autovacuum_enabled = false)`)
	require.NoError(t, err)
	const n = 5000
	fill(t, s, n)
	reg := prometheus.NewRegistry()
	start(t, s, nil, outboxrelay.Config{Publisher: &flakyPublisher{acked: map[string]int{}}, BatchSize: 500, NoListen: true, PollInterval: 20 * time.Millisecond,
		VacuumDeadRows: 1000, VacuumCheckInterval: 50 * time.Millisecond, Registerer: reg})
	waitEmpty(t, s, 30*time.Second)
	stats := func() (dead, vacuums int64) {
		_, err := s.Pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`)
		require.NoError(t, err)
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT n_dead_tup, vacuum_count FROM pg_stat_user_tables WHERE relid = 'outbox'::regclass`).Scan(&dead, &vacuums))
		return dead, vacuums
	}
	// The server counts a vacuum before the relay's Exec returns and the
	// relay counts it, so the two counters are awaited together. Autovacuum
	// is off for the outbox: a vacuum counted here is the relay's.
	require.Eventually(t, func() bool {
		dead, vacuums := stats()
		return vacuums > 0 && dead < 1000 && metric(t, reg, "hookyard_outbox_vacuums_total") > 0
	}, 30*time.Second, 50*time.Millisecond, "the outbox keeps its dead rows, or the relay did not count its vacuum")
}

// A vacuum of the outbox keeps its empty pages: giving them back takes an
// ACCESS EXCLUSIVE lock that intake's inserts wait behind, and the queue
// refills them a moment later. Autovacuum's follows the table's
// vacuum_truncate (migration 00046); the relay's own says TRUNCATE false:
// with the table's setting reset, after every row was published and
// deleted and the relay vacuumed, the table still has its pages. Fails when
// either truncates.
func TestVacuumsOfTheOutboxLeaveItsPages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pages := func(s *dbtest.Schema) int64 {
		var n int64
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT pg_relation_size('outbox') / current_setting('block_size')::int`).Scan(&n))
		return n
	}
	drain := func(s *dbtest.Schema) {
		fill(t, s, 5000)
		_, err := s.Pool.Exec(ctx, `DELETE FROM outbox`)
		require.NoError(t, err)
	}

	t.Run("autovacuum", func(t *testing.T) {
		t.Parallel()
		s := dbtest.New(t)
		// Whether a vacuum here could truncate depends on the snapshots of
		// the tests beside it; the table's setting is what autovacuum reads.
		var opts []string
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = 'outbox'::regclass`).Scan(&opts))
		require.Contains(t, opts, "vacuum_truncate=false")
	})

	t.Run("the relay's vacuum", func(t *testing.T) {
		t.Parallel()
		s := dbtest.New(t)
		_, err := s.Pool.Exec(ctx, `ALTER TABLE outbox SET (autovacuum_enabled = false); ALTER TABLE outbox RESET (vacuum_truncate)`)
		require.NoError(t, err)
		drain(s)
		before := pages(s)
		require.Positive(t, before)
		reg := prometheus.NewRegistry()
		start(t, s, nil, outboxrelay.Config{Publisher: &flakyPublisher{acked: map[string]int{}}, NoListen: true, PollInterval: 20 * time.Millisecond,
			VacuumDeadRows: 1000, VacuumCheckInterval: 50 * time.Millisecond, Registerer: reg})
		require.Eventually(t, func() bool { return metric(t, reg, "hookyard_outbox_vacuums_total") > 0 }, 30*time.Second, 20*time.Millisecond)
		require.Equal(t, before, pages(s), "the relay's vacuum truncated the outbox")
	})
}
