package chaos

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// hookyardBinary builds the module's binary once per test process.
func hookyardBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hookyard-chaos-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "hookyard")
		// The deprecation is about binaries copied to another machine; a
		// test binary runs where it was built, with the toolchain that built it.
		//lint:ignore SA1019 see above
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", binary, "github.com/hookyard/hookyard").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w: %s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binary
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		_ = os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

func TestTheSameSeedGivesTheSameSchedule(t *testing.T) {
	t.Parallel()
	c := Config{Seed: 42, Subscriptions: 2000, Events: 30000}.withDefaults().planConfig()
	a, b := newPlan(c), newPlan(c)
	require.Equal(t, a.digest(), b.digest())
	require.Equal(t, a.faults, b.faults)
	c.seed = 43
	require.NotEqual(t, a.digest(), newPlan(c).digest())
	require.Positive(t, a.dropped)
	require.Positive(t, a.concurrent)
	kinds := map[string]bool{}
	for _, f := range a.faults {
		kinds[f.kind] = true
	}
	require.Len(t, kinds, 6, "every kind of fault is scheduled: %v", kinds)
}

// A dropped delivery is one the reconciler can still recover: never an
// invoice, never a Chargebee subscription's last event, never a Stripe
// subscription's last event unless it is the cancellation.
func TestDroppedDeliveriesAreOnlyOnesTheReconcilerRecovers(t *testing.T) {
	t.Parallel()
	p := newPlan(Config{Seed: 7, Subscriptions: 500, Events: 8000}.withDefaults().planConfig())
	for _, e := range p.events {
		if len(e.offsets) > 0 {
			continue
		}
		sb := p.subs[e.sub]
		st := sb.steps[e.step]
		require.Empty(t, st.invoice, e.id)
		if e.step == len(sb.steps)-1 {
			require.Equal(t, stripeProv, sb.prov, e.id)
			require.True(t, sb.terminalCancel, e.id)
		}
	}
}

// A processor killed with -9 while events flow: its partitions move to the
// survivor after the group's session timeout (6 s by default), not
// franz-go's 45 s. The bound is liveness only; the time is printed.
func TestKilledProcessorsPartitionsResumeOnTheSurvivor(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the services as processes for half a minute; make test runs it")
	}
	var out bytes.Buffer
	rep, err := Run(context.Background(), Config{Seed: 3, Subscriptions: 60, Events: 600, Processors: 2, Relays: 1,
		Binary: hookyardBinary(t), DatabaseURL: DefaultDatabaseURL(), QuiesceTimeout: 3 * time.Minute,
		trafficFor: 25 * time.Second, schedule: []fault{{at: 8 * time.Second, kind: faultKillProcessor, target: 0, hold: 30 * time.Second}}}, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)
	require.Len(t, rep.Stalls, 1)
	require.Positive(t, rep.Stalls[0].Partitions, "the killed processor owned partitions")
	require.GreaterOrEqual(t, rep.Stalls[0].Took, time.Duration(0), "events flowed on its partitions after the kill")
	require.Less(t, rep.Stalls[0].Took, 30*time.Second, "its partitions resumed on the survivor")
	t.Logf("partitions of the killed processor resumed after %s", rep.Stalls[0].Took)
}

// The small run of `make chaos`: every service a process, every kind of
// fault, disordered, duplicated and dropped deliveries; every invariant of
// the table holds.
func TestChaosRunKeepsEveryInvariant(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the services as processes for about a minute; make test runs it")
	}
	var out bytes.Buffer
	cfg := smallRun(t)
	cfg.Binary = hookyardBinary(t)
	_, err := Run(context.Background(), cfg, &out)
	t.Log("\n" + out.String())
	require.NoError(t, err)
}

// The small run of make test meets every kind of fault.
func TestSmallRunScheduleHasEveryKindOfFault(t *testing.T) {
	t.Parallel()
	p := newPlan(smallRun(t).withDefaults().planConfig())
	kinds := map[string]bool{}
	for _, f := range p.faults {
		kinds[f.kind] = true
	}
	require.Contains(t, kinds, faultKillProcessor)
	require.Contains(t, kinds, faultPauseProcessor)
	require.Contains(t, kinds, faultKillRelay)
	require.Contains(t, kinds, faultTerminatePG)
	require.True(t, kinds[faultMoveLeaders] || kinds[faultMoveCoordinator], "a broker fault: %v", kinds)
}

func smallRun(t *testing.T) Config {
	return Config{Seed: 1, Subscriptions: 80, Events: 800, DatabaseURL: DefaultDatabaseURL(), QuiesceTimeout: 4 * time.Minute}
}
