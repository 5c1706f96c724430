//go:build realkafka

// Package brokerfault runs the pipeline against the real three-broker
// cluster of `make kafka` and breaks a broker under load: the failures only a
// real cluster has (a leader killed with SIGKILL, a broker gone for a
// minute). It needs KAFKA_BROKERS and HOOKYARD_KAFKA_SCRIPT (scripts/kafka.sh,
// which can kill and restart one node), so it is built only with the
// realkafka tag: `make test-kafka` runs it, `make test` does not build it.
package brokerfault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
)

// ScriptEnv names the variable holding the path of scripts/kafka.sh.
const ScriptEnv = "HOOKYARD_KAFKA_SCRIPT"

const (
	cbEndpoint = "cb-fault"
	cbSite     = "site-fault"
	partitions = 6
	// subs is how many subscriptions receive versioned snapshots at once,
	// each from its own sender, in version order.
	subs = 24
	// sendEvery paces each sender: subs/sendEvery events per second in all
	// (about 240/s), enough to keep every partition busy on two shared cores.
	sendEvery = 100 * time.Millisecond
	// drainTimeout bounds the wait for the pipeline to catch up after the
	// broker is back: the relay and processors must recover on their own.
	drainTimeout = 3 * time.Minute
)

// cluster is the real cluster under test and the script that controls it.
type cluster struct {
	t       *testing.T
	script  string
	brokers []string
	adm     *kadm.Client
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	script, brokers := os.Getenv(ScriptEnv), kafkatest.RealBrokers()
	if script == "" || len(brokers) == 0 {
		t.Fatalf("built with -tags realkafka but %s or %s is unset: run `make test-kafka`", ScriptEnv, kafkatest.BrokersEnv)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	c := &cluster{t: t, script: script, brokers: brokers, adm: kadm.NewClient(cl)}
	// Whatever happens in the test, every node runs again afterwards: the
	// tests after this one share the cluster.
	t.Cleanup(func() {
		for n := 1; n <= 3; n++ {
			if out, err := exec.Command("bash", script, "start-node", strconv.Itoa(n)).CombinedOutput(); err != nil {
				t.Errorf("restart node %d after the test: %v: %s", n, err, out)
			}
		}
	})
	return c
}

// run runs a script subcommand.
func (c *cluster) run(args ...string) {
	c.t.Helper()
	out, err := exec.Command("bash", append([]string{c.script}, args...)...).CombinedOutput()
	require.NoError(c.t, err, "kafka.sh %s: %s", strings.Join(args, " "), out)
}

// partitionsOf describes the topic's partitions.
func (c *cluster) partitionsOf(ctx context.Context, topic string) map[int32]kadm.PartitionDetail {
	td, err := c.adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		return nil
	}
	return td[topic].Partitions
}

// busiestPartition returns the partition with the most records and its
// leader's node id.
func (c *cluster) busiestPartition(ctx context.Context, topic string) (int32, int32) {
	c.t.Helper()
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	require.NoError(c.t, err)
	best, bestOff := int32(-1), int64(-1)
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err == nil && o.Offset > bestOff {
			best, bestOff = o.Partition, o.Offset
		}
	})
	require.GreaterOrEqual(c.t, best, int32(0), "no partition with an end offset")
	p, ok := c.partitionsOf(ctx, topic)[best]
	require.True(c.t, ok)
	return best, p.Leader
}

// waitLeaderNot waits until partition's leader is a node other than node
// and returns when it saw it.
func (c *cluster) waitLeaderNot(ctx context.Context, topic string, partition, node int32) time.Time {
	c.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if p, ok := c.partitionsOf(ctx, topic)[partition]; ok && p.Leader >= 0 && p.Leader != node {
			return time.Now()
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("partition %d still led by node %d after 2 minutes", partition, node)
	return time.Time{}
}

// waitFullISR waits until every partition of topic has all three replicas
// in sync again and returns when it saw it.
func (c *cluster) waitFullISR(ctx context.Context, topic string) time.Time {
	c.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		parts := c.partitionsOf(ctx, topic)
		full := len(parts) == partitions
		for _, p := range parts {
			if len(p.ISR) < 3 {
				full = false
			}
		}
		if full {
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("topic %s not fully in sync 3 minutes after the restart", topic)
	return time.Time{}
}

// ledBy is the set of topic partitions whose leader is node.
func (c *cluster) ledBy(ctx context.Context, topic string, node int32) map[int32]bool {
	out := map[int32]bool{}
	for id, p := range c.partitionsOf(ctx, topic) {
		if p.Leader == node {
			out[id] = true
		}
	}
	return out
}

// traffic posts Chargebee subscription snapshots (basic auth, versioned)
// through the receiver, each subscription's versions in order, until stop.
type traffic struct {
	p        *pipelinetest.Pipeline
	stop     chan struct{}
	wg       sync.WaitGroup
	accepted atomic.Int64
	last     []atomic.Int64 // last accepted version per subscription
	failures atomic.Int64
}

func subID(i int) string { return fmt.Sprintf("sub_fault_%02d", i) }

func resource(i int) message.Resource {
	return message.Resource{Provider: provider.Chargebee, SourceAccount: cbSite, Environment: "test", Type: "subscription", ID: subID(i)}
}

func endpoints() []provider.Endpoint {
	return []provider.Endpoint{{ID: cbEndpoint, Provider: provider.Chargebee, SourceAccount: cbSite, Environment: "test", Secrets: []string{"u:p"}}}
}

func cbEvent(sub string, version int64) []byte {
	status := []string{"active", "non_renewing", "active", "paused"}[version%4]
	b, err := json.Marshal(map[string]any{
		"id": fmt.Sprintf("ev_%s_%06d", sub, version), "event_type": "subscription_changed", "occurred_at": time.Now().Unix(),
		"api_version": "v2", "object": "event",
		"content": map[string]any{"subscription": map[string]any{
			"id": sub, "customer_id": "cus_" + sub, "status": status, "resource_version": version,
			"current_term_end": time.Now().Add(30 * 24 * time.Hour).Unix(),
		}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

func startTraffic(p *pipelinetest.Pipeline) *traffic {
	tr := &traffic{p: p, stop: make(chan struct{}), last: make([]atomic.Int64, subs)}
	url := p.Receiver.URL + "/webhooks/" + cbEndpoint
	for i := range subs {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			tick := time.NewTicker(sendEvery)
			defer tick.Stop()
			for v := int64(1); ; v++ {
				select {
				case <-tr.stop:
					return
				case <-tick.C:
				}
				// The receiver needs only Postgres: a broker outage must never
				// turn into a refused webhook. A failed post is resent with the
				// same version, as the provider would.
				for {
					req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(cbEvent(subID(i), v)))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth("u", "p"))
					resp, err := http.DefaultClient.Do(req)
					if err == nil {
						resp.Body.Close()
						if resp.StatusCode == http.StatusOK {
							break
						}
					}
					tr.failures.Add(1)
					select {
					case <-tr.stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
				}
				tr.accepted.Add(1)
				tr.last[i].Store(v)
			}
		}()
	}
	return tr
}

func (tr *traffic) Stop() {
	select {
	case <-tr.stop:
	default:
		close(tr.stop)
	}
	tr.wg.Wait()
}

// drained waits until every accepted event is processed and the outbox is
// empty, and returns when it saw it.
func drained(t *testing.T, p *pipelinetest.Pipeline, accepted int64) time.Time {
	t.Helper()
	deadline := time.Now().Add(drainTimeout)
	var processed, outbox int64
	for time.Now().Before(deadline) {
		err := p.Pool.QueryRow(t.Context(), `
SELECT (SELECT count(*) FROM webhook_inbox WHERE status = 'processed' AND processed_at IS NOT NULL),
       (SELECT count(*) FROM outbox)`).Scan(&processed, &outbox)
		require.NoError(t, err)
		if processed == accepted && outbox == 0 {
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pipeline did not recover on its own within %s: %d of %d accepted events processed, %d rows in the outbox",
		drainTimeout, processed, accepted, outbox)
	return time.Time{}
}

// requireNothingLostOrReordered checks the promise under failure: every
// accepted event processed; each subscription's projection at its last
// version; its history of applied writes strictly increasing (never
// backwards) with no event applied twice. It returns how many events were
// recorded as stale (applied out of order would have been a regression;
// stale means the fence of versions caught a late copy).
func requireNothingLostOrReordered(t *testing.T, p *pipelinetest.Pipeline, tr *traffic) (stale int) {
	t.Helper()
	ctx := t.Context()
	var notProcessed int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status <> 'processed' OR processed_at IS NULL`).Scan(&notProcessed))
	require.Zero(t, notProcessed, "accepted events not processed")
	for i := range subs {
		pr, ok := p.Projection(resource(i))
		require.True(t, ok, subID(i))
		require.NotNil(t, pr.Version, subID(i))
		require.Equal(t, tr.last[i].Load(), *pr.Version, "%s: projection not at its last accepted version", subID(i))
	}
	rows, err := p.Pool.Query(ctx, `
SELECT resource_id, event_id, outcome, provider_version FROM projection_history
WHERE provider = 'chargebee' ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	lastApplied := map[string]int64{}
	appliedEvents := map[string]int{}
	for rows.Next() {
		var res, ev, outcome string
		var version *int64
		require.NoError(t, rows.Scan(&res, &ev, &outcome, &version))
		switch outcome {
		case "applied":
			require.NotNil(t, version)
			require.Greater(t, *version, lastApplied[res], "%s moved backwards: applied %d after %d", res, *version, lastApplied[res])
			lastApplied[res] = *version
			appliedEvents[ev]++
			require.Equal(t, 1, appliedEvents[ev], "event %s applied twice", ev)
		case "stale":
			stale++
		}
	}
	require.NoError(t, rows.Err())
	return stale
}

// firstApplyAfter is when the first event received after since, of a
// subscription whose key maps to one of parts, was processed.
func firstApplyAfter(t *testing.T, p *pipelinetest.Pipeline, since time.Time, parts map[int32]bool) (time.Time, bool) {
	t.Helper()
	var ids []string
	part := kgo.StickyKeyPartitioner(nil).ForTopic(p.Kafka.Topic)
	for i := range subs {
		if parts[int32(part.Partition(&kgo.Record{Key: []byte(resource(i).Key())}, partitions))] {
			ids = append(ids, subID(i))
		}
	}
	if len(ids) == 0 {
		return time.Time{}, false
	}
	var at *time.Time
	require.NoError(t, p.Pool.QueryRow(t.Context(), `
SELECT min(processed_at) FROM webhook_inbox
WHERE provider = 'chargebee' AND resource_id = ANY($1) AND received_at > $2`, ids, since).Scan(&at))
	if at == nil {
		return time.Time{}, false
	}
	return *at, true
}

// worstLatency is the longest receive-to-processed time of the events
// received in [from, to).
func worstLatency(t *testing.T, p *pipelinetest.Pipeline, from, to time.Time) time.Duration {
	t.Helper()
	var secs *float64
	require.NoError(t, p.Pool.QueryRow(t.Context(), `
SELECT max(extract(epoch FROM processed_at - received_at))::float8 FROM webhook_inbox
WHERE received_at >= $1 AND received_at < $2`, from, to).Scan(&secs))
	if secs == nil {
		return 0
	}
	return time.Duration(*secs * float64(time.Second))
}
