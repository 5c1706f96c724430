package reconciler_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/github/githubsim"
	"github.com/hookyard/hookyard/reconciler"
)

// clock is a simulated time shared by GitHub (the simulator) and the
// reconciler.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// githubAt is a GitHub pipeline on a simulated clock, and a reconciler of
// its hook on the same clock (cfg's Sources, Now and Registerer are set).
func githubAt(t *testing.T, cfg reconciler.Config, wrap ...func(http.Handler) http.Handler) (*clock, *pipelinetest.Pipeline, *githubsim.Sim, *reconciler.Reconciler) {
	t.Helper()
	clk := &clock{t: time.Now().UTC().Truncate(time.Second)}
	p, sim, src := githubPipelineWith(t, githubsim.Config{Now: clk.Now}, wrap...)
	cfg.Sources, cfg.Now = []provider.Source{src}, clk.Now
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	return clk, p, sim, reconciler.New(p.Pool, p.Log, cfg)
}

var pushPayload = map[string]any{"ref": "refs/heads/main", "repository": map[string]any{"id": 1296269, "full_name": "gh-org/repo"}}

func inboxHolds(t *testing.T, p *pipelinetest.Pipeline, guid string) bool {
	t.Helper()
	var n int
	require.NoError(t, p.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_inbox WHERE provider = 'github' AND event_id = $1`, guid).Scan(&n))
	return n > 0
}

// The receiver refuses GitHub for a while: delivery G fails and so does
// its redelivery. Then one delivery succeeds every 5 minutes for 90
// minutes, each round moving the walk's high water on, so G's attempts
// leave the walk's window long before RedeliverAgainAfter allows asking
// again. GitHub never redelivers by itself: G must still be asked again
// and arrive. Fails if failed deliveries are followed only while the walk
// lists them.
func TestFailedGitHubRedeliveryIsAskedAgainWhileOtherDeliveriesFlow(t *testing.T) {
	t.Parallel()
	clk, p, sim, r := githubAt(t, reconciler.Config{})
	ctx := context.Background()

	sim.SetDown(true)
	g, _, err := sim.Send(ctx, "push", pushPayload)
	require.NoError(t, err)
	_, err = r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	sim.Wait()
	require.Equal(t, 1, sim.Redeliveries(g), "G is asked for once")
	require.False(t, inboxHolds(t, p, g), "its redelivery failed too")
	sim.SetDown(false)

	for range 18 {
		clk.Advance(5 * time.Minute)
		_, status, err := sim.Send(ctx, "push", pushPayload)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status)
		_, err = r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		sim.Wait()
	}
	require.Equal(t, 2, sim.Redeliveries(g), "asked again once RedeliverAgainAfter passed, not more")
	require.True(t, inboxHolds(t, p, g), "the second redelivery brought G")
	var rows int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM reconcile_redelivery`).Scan(&rows))
	require.Zero(t, rows, "an arrived event is no longer followed")
}

// GitHub refuses a redelivery of a delivery older than 3 days with 422
// (reachable with a 72h backfill: the delivery is listed, and past the
// limit by the time it is asked for). The refusal is recorded on that
// delivery, given up with GitHub's reason, and the walk goes on: a failed
// delivery that comes later is still asked for. Fails if the refusal
// interrupts the walk at the same cursor every round.
func TestRefusedGitHubRedeliveryIsGivenUpAndTheWalkMovesOn(t *testing.T) {
	t.Parallel()
	var clk *clock
	// Time passes between the listing and the ask, as it does on a walk
	// of 3 days of deliveries.
	late := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/attempts") {
				clk.Advance(2 * time.Minute)
			}
			h.ServeHTTP(w, r)
		})
	}
	reg := prometheus.NewRegistry()
	clk, p, sim, r := githubAt(t, reconciler.Config{Registerer: reg, PageSize: 1, Backfill: 72 * time.Hour}, late)
	ctx := context.Background()

	sim.SetDown(true)
	old, _, err := sim.Send(ctx, "push", pushPayload)
	require.NoError(t, err)
	sim.SetDown(false)
	_, status, err := sim.Send(ctx, "push", pushPayload)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	clk.Advance(72*time.Hour - time.Minute)

	_, err = r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	sim.Wait()

	sim.SetDown(true)
	newer, _, err := sim.Send(ctx, "push", pushPayload)
	require.NoError(t, err)
	sim.SetDown(false)
	for range 2 {
		_, err = r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		sim.Wait()
	}
	require.Equal(t, 1, sim.Redeliveries(newer), "the failed delivery after the refused one is asked for")
	require.True(t, inboxHolds(t, p, newer))
	require.False(t, inboxHolds(t, p, old))

	given, err := reconciler.GivenUpRedeliveries(ctx, p.Pool, 10)
	require.NoError(t, err)
	require.Len(t, given, 1)
	require.Equal(t, old, given[0].GUID)
	require.Contains(t, given[0].Reason, reconciler.GiveUpRefused)
	require.Contains(t, given[0].Reason, "422")
	require.Equal(t, 1.0, counterValue(t, reg, "hookyard_reconciler_redeliveries_given_up_total"))
}

// A followed delivery not arrived 3 days after it first failed is given
// up without asking: GitHub would refuse it.
func TestFollowedRedeliveryIsGivenUpAfterThreeDays(t *testing.T) {
	t.Parallel()
	clk, p, sim, r := githubAt(t, reconciler.Config{})
	ctx := context.Background()
	sim.SetDown(true) // the receiver stays unreachable
	g, _, err := sim.Send(ctx, "push", pushPayload)
	require.NoError(t, err)
	for range 4 * 24 {
		_, err := r.Round(ctx, reconciler.Filter{})
		require.NoError(t, err)
		sim.Wait()
		clk.Advance(time.Hour)
	}
	require.Equal(t, 72, sim.Redeliveries(g), "asked every RedeliverAgainAfter for 3 days, then no more")
	given, err := reconciler.GivenUpRedeliveries(ctx, p.Pool, 10)
	require.NoError(t, err)
	require.Len(t, given, 1)
	require.Equal(t, reconciler.GiveUpTooOld, given[0].Reason)
}

// GitHub answers 404 for a hook the token can no longer see (a revoked
// token, a removed hook) on every call: that is no refusal of one
// delivery's redelivery, and the followed deliveries are kept. Fails if a
// round that could not list the hook gives up everything it follows.
func TestUnreachableHookGivesUpNoFollowedDelivery(t *testing.T) {
	t.Parallel()
	var gone atomic.Bool
	hide := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if gone.Load() && !strings.HasPrefix(r.URL.Path, "/sim/") {
				http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
	clk, p, sim, r := githubAt(t, reconciler.Config{}, hide)
	ctx := context.Background()
	sim.SetDown(true)
	_, _, err := sim.Send(ctx, "push", pushPayload)
	require.NoError(t, err)
	_, err = r.Round(ctx, reconciler.Filter{})
	require.NoError(t, err)
	sim.Wait()

	gone.Store(true)
	clk.Advance(2 * time.Hour)
	_, err = r.Round(ctx, reconciler.Filter{})
	require.Error(t, err)
	given, err := reconciler.GivenUpRedeliveries(ctx, p.Pool, 10)
	require.NoError(t, err)
	require.Empty(t, given)
}
