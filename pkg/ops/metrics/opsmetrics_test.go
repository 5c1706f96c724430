package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/metrics"
)

func gauges(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			out[key(mf.GetName(), m)] = m.GetGauge().GetValue()
		}
	}
	return out
}

func key(name string, m *dto.Metric) string {
	for _, lp := range m.GetLabel() {
		name += " " + lp.GetName() + "=" + lp.GetValue()
	}
	return name
}

func insertEvent(t *testing.T, s *dbtest.Schema, id, status string, age time.Duration) {
	t.Helper()
	_, err := s.Pool.Exec(context.Background(), `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, status, received_at)
VALUES ('stripe', 'acct', 'live', $1, 'ep', 'customer.subscription.updated', $2, now() - make_interval(secs => $3))`,
		id, status, age.Seconds())
	require.NoError(t, err)
}

// The backlog gauges follow the inbox and the action table on every scrape:
// the oldest pending and retrying events' ages, counts by status, and open
// actions by kind and status. Finished rows never count. Fails if a gauge
// is removed or reads finished rows.
func TestGaugesFollowInboxAndActions(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(s.Pool, pipelinetest.Logger(t), metrics.Config{}))

	g := gauges(t, reg)
	require.Equal(t, 1.0, g["hookyard_db_gauges_up"])
	require.Equal(t, 0.0, g["hookyard_inbox_oldest_pending_age_seconds status=pending"])
	require.Equal(t, 0.0, g["hookyard_inbox_oldest_pending_age_seconds status=retrying"])
	require.Zero(t, testutil.CollectAndCount(reg, "hookyard_actions_open"))
	require.Equal(t, 0.0, g["hookyard_actions_oldest_pending_age_seconds kind=receipt"])

	insertEvent(t, s, "evt_done", "processed", 3*time.Hour)
	insertEvent(t, s, "evt_p_old", "pending", 10*time.Minute)
	insertEvent(t, s, "evt_p_new", "pending", time.Minute)
	insertEvent(t, s, "evt_r", "retrying", time.Hour)
	insertEvent(t, s, "evt_dead", "dead", 2*time.Hour)
	_, err := s.Pool.Exec(ctx, `
INSERT INTO action (provider, source_account, environment, subject_id, kind, status, event_id, created_at)
VALUES ('stripe', 'acct', 'live', 'in_1', 'receipt', 'pending', 'e1', now() - interval '5 minutes'),
       ('stripe', 'acct', 'live', 'in_2', 'receipt', 'pending', 'e2', now()),
       ('stripe', 'acct', 'live', 'in_3', 'receipt', 'failed', 'e3', now() - interval '20 minutes'),
       ('stripe', 'acct', 'live', 'in_5', 'receipt', 'dead', 'e5', now() - interval '3 days'),
       ('stripe', 'acct', 'live', 'in_4', 'receipt', 'sent', 'e4', now() - interval '1 day')`)
	require.NoError(t, err)

	g = gauges(t, reg)
	require.InDelta(t, 600, g["hookyard_inbox_oldest_pending_age_seconds status=pending"], 30)
	require.InDelta(t, 3600, g["hookyard_inbox_oldest_pending_age_seconds status=retrying"], 30)
	require.Equal(t, 2.0, g["hookyard_inbox_events status=pending"])
	require.Equal(t, 1.0, g["hookyard_inbox_events status=retrying"])
	require.Equal(t, 1.0, g["hookyard_inbox_events status=dead"])
	require.Equal(t, 2.0, g["hookyard_actions_open kind=receipt status=pending"])
	require.Equal(t, 1.0, g["hookyard_actions_open kind=receipt status=failed"])
	require.Equal(t, 1.0, g["hookyard_actions_open kind=receipt status=dead"])
	require.Equal(t, 3, testutil.CollectAndCount(reg, "hookyard_actions_open"), "sent actions are not open")
	require.InDelta(t, 1200, g["hookyard_actions_oldest_pending_age_seconds kind=receipt"], 30,
		"the oldest action still to be sent (a dead one waits for an operator, not the sender)")

	// The oldest pending event is processed: the age falls to the next one.
	_, err = s.Pool.Exec(ctx, `UPDATE webhook_inbox SET status = 'processed' WHERE event_id = 'evt_p_old'`)
	require.NoError(t, err)
	g = gauges(t, reg)
	require.InDelta(t, 60, g["hookyard_inbox_oldest_pending_age_seconds status=pending"], 30)
	require.Equal(t, 1.0, g["hookyard_inbox_events status=pending"])

	// A week-old dead event replayed now waits since its replay, not since
	// it arrived: the gauge must not page for it.
	insertEvent(t, s, "evt_week_old", "dead", 7*24*time.Hour)
	_, err = s.Pool.Exec(ctx, `UPDATE webhook_inbox SET payload = '{}' WHERE event_id = 'evt_week_old'`)
	require.NoError(t, err)
	n, err := inbox.Replay(ctx, s.Pool, inbox.Key{Provider: "stripe", SourceAccount: "acct", Environment: "live", EventID: "evt_week_old"})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	g = gauges(t, reg)
	require.InDelta(t, 60, g["hookyard_inbox_oldest_pending_age_seconds status=pending"], 30)
	require.Equal(t, 2.0, g["hookyard_inbox_events status=pending"])
}

// A database that does not answer makes the gauges report up 0 and nothing
// else, instead of failing the scrape of every other metric.
func TestGaugesReportDownInsteadOfFailingTheScrape(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(s.Pool, pipelinetest.Logger(t), metrics.Config{Timeout: time.Second}))
	s.Pool.Close()
	g := gauges(t, reg)
	require.Equal(t, map[string]float64{"hookyard_db_gauges_up": 0}, g)
}
