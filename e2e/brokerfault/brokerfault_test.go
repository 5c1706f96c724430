//go:build realkafka

package brokerfault

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
)

const (
	// warmup is how long traffic flows before the broker fails.
	warmup = 5 * time.Second
	// killedFor is how long the killed leader stays dead: longer than the
	// controller's broker session timeout (9 s), so its partitions really
	// move to another leader.
	killedFor = 15 * time.Second
	// stoppedFor is how long a broker stays stopped while traffic flows.
	stoppedFor = time.Minute
	// after is how long traffic goes on once the broker is back.
	after = 10 * time.Second
)

// The tests here never run in parallel: each breaks a broker of the cluster
// that every other test shares.
func newPipeline(t *testing.T) *pipelinetest.Pipeline {
	t.Helper()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: partitions, Endpoints: endpoints()})
	p.StartProcessor("p2", nil) // two members: a rebalance, not only a failover
	return p
}

// A leader killed with SIGKILL (no controlled shutdown) in the middle of a
// busy partition loses nothing: the relay's idempotent acks=all producer
// moves to the new leader, the processors to the new coordinator, every
// accepted event is processed, no projection moves backwards and no event is
// applied twice; nobody intervenes. Prints how long the partition and the
// pipeline took to recover.
func TestKilledPartitionLeaderLosesNothing(t *testing.T) {
	c := newCluster(t)
	p := newPipeline(t)
	ctx := t.Context()
	tr := startTraffic(p)
	defer tr.Stop()
	time.Sleep(warmup)

	part, leader := c.busiestPartition(ctx, p.Kafka.Topic)
	led := c.ledBy(ctx, p.Kafka.Topic, leader)
	killedAt := time.Now()
	c.run("kill", strconv.Itoa(int(leader)))
	newLeaderAt := c.waitLeaderNot(ctx, p.Kafka.Topic, part, leader)
	time.Sleep(time.Until(killedAt.Add(killedFor)))
	restartAt := time.Now()
	c.run("start-node", strconv.Itoa(int(leader)))
	restartedAt := time.Now()
	time.Sleep(after)
	tr.Stop()
	drainedAt := drained(t, p, tr.accepted.Load())
	fullISRAt := c.waitFullISR(ctx, p.Kafka.Topic)

	stale := requireNothingLostOrReordered(t, p, tr)
	first, ok := firstApplyAfter(t, p, killedAt, led)
	require.True(t, ok, "no event of the killed leader's partitions was processed after the kill")
	t.Logf("recovery: kill -9 of node %d (leader of busiest partition %d and of %d of %d partitions): "+
		"new leader after %s; first event of its partitions received after the kill processed %s after the kill; "+
		"worst receive-to-processed while it was dead %s; node back in %s, all replicas in sync %s after its restart; "+
		"%d events accepted (%d posts retried), all processed, drained %s after traffic stopped; %d stale copies refused",
		leader, part, len(led), partitions, newLeaderAt.Sub(killedAt).Round(time.Millisecond), first.Sub(killedAt).Round(time.Millisecond),
		worstLatency(t, p, killedAt, restartAt).Round(time.Millisecond), restartedAt.Sub(restartAt).Round(time.Millisecond),
		fullISRAt.Sub(restartAt).Round(time.Millisecond), tr.accepted.Load(), tr.failures.Load(),
		drainedAt.Sub(restartedAt.Add(after)).Round(time.Millisecond), stale)
}

// A broker stopped for a minute while traffic flows (the other two keep
// min.insync.replicas=2) loses nothing, and when it comes back it catches
// up without anyone's help: every accepted event processed once in effect,
// no projection backwards. Prints the recovery figures.
func TestBrokerStoppedForAMinuteLosesNothing(t *testing.T) {
	c := newCluster(t)
	p := newPipeline(t)
	ctx := t.Context()
	tr := startTraffic(p)
	defer tr.Stop()
	time.Sleep(warmup)

	_, node := c.busiestPartition(ctx, p.Kafka.Topic)
	led := c.ledBy(ctx, p.Kafka.Topic, node)
	stoppedAt := time.Now()
	c.run("stop-node", strconv.Itoa(int(node)))
	stopTook := time.Since(stoppedAt)
	time.Sleep(time.Until(stoppedAt.Add(stoppedFor)))
	restartAt := time.Now()
	c.run("start-node", strconv.Itoa(int(node)))
	restartedAt := time.Now()
	time.Sleep(after)
	tr.Stop()
	drainedAt := drained(t, p, tr.accepted.Load())
	fullISRAt := c.waitFullISR(ctx, p.Kafka.Topic)

	stale := requireNothingLostOrReordered(t, p, tr)
	first, ok := firstApplyAfter(t, p, stoppedAt, led)
	require.True(t, ok, "no event of the stopped broker's partitions was processed after the stop")
	t.Logf("recovery: node %d stopped for %s (SIGTERM, controlled shutdown took %s; it led %d of %d partitions): "+
		"first event of its partitions received after the stop processed %s after the stop; worst receive-to-processed "+
		"while it was down %s; node back in %s, all replicas in sync %s after its restart; %d events accepted (%d posts retried), "+
		"all processed, drained %s after traffic stopped; %d stale copies refused",
		node, stoppedFor, stopTook.Round(time.Millisecond), len(led), partitions, first.Sub(stoppedAt).Round(time.Millisecond),
		worstLatency(t, p, stoppedAt, restartAt).Round(time.Millisecond), restartedAt.Sub(restartAt).Round(time.Millisecond),
		fullISRAt.Sub(restartAt).Round(time.Millisecond), tr.accepted.Load(), tr.failures.Load(),
		drainedAt.Sub(restartedAt.Add(after)).Round(time.Millisecond), stale)
}
