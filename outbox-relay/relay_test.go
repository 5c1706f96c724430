package outboxrelay_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/internal/testkit/promread"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/db"
)

const keys = 37

// logger writes to the test log with -v or HOOKYARD_TEST_LOG set.
func logger(t *testing.T) *slog.Logger {
	if testing.Verbose() || os.Getenv("HOOKYARD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// fill inserts n rows, seq 1..n, spread over keys message keys.
func fill(t *testing.T, s *dbtest.Schema, n int) {
	t.Helper()
	_, err := s.Pool.Exec(t.Context(), `
INSERT INTO outbox (message_key, message)
SELECT 'stripe/acct/test/subscription/sub_' || (g % $2), jsonb_build_object('kind', 'event', 'seq', g)
FROM generate_series(1, $1) g`, n, keys)
	require.NoError(t, err)
}

func count(t *testing.T, s *dbtest.Schema) int {
	var n int
	require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox`).Scan(&n))
	return n
}

func waitEmpty(t *testing.T, s *dbtest.Schema, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return count(t, s) == 0 }, within, 10*time.Millisecond, "outbox not drained")
}

// start runs a relay until the test ends; stop stops it early.
func start(t *testing.T, s *dbtest.Schema, k *kafkatest.Cluster, cfg outboxrelay.Config) (r *outboxrelay.Relay, stop func()) {
	t.Helper()
	if cfg.Publisher == nil {
		cfg.Brokers, cfg.Topic = k.Brokers, k.Topic
	}
	r, err := outboxrelay.New(s.Pool, logger(t), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); require.NoError(t, r.Run(ctx)) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return r, stop
}

type published struct {
	key       string
	seq       int
	partition int32
	offset    int64
}

// consume reads n records from the topic's start (failing after a deadline).
func consume(t *testing.T, k *kafkatest.Cluster, n int) []published {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumeTopics(k.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []published
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var m struct{ Seq int }
			require.NoError(t, json.Unmarshal(r.Value, &m))
			out = append(out, published{key: string(r.Key), seq: m.Seq, partition: r.Partition, offset: r.Offset})
		})
	}
	require.Equal(t, n, len(out), "records on the topic")
	return out
}

// requireEachOnce checks that seq 1..n each appear exactly once, each key on
// one partition.
func requireEachOnce(t *testing.T, recs []published, n int) {
	t.Helper()
	seen := map[int]int{}
	partOf := map[string]int32{}
	for _, r := range recs {
		seen[r.seq]++
		if p, ok := partOf[r.key]; ok {
			require.Equal(t, p, r.partition, "key %s on two partitions", r.key)
		}
		partOf[r.key] = r.partition
	}
	for i := 1; i <= n; i++ {
		require.Equal(t, 1, seen[i], "row %d published %d times", i, seen[i])
	}
}

// Relays run side by side: rows are claimed with SKIP LOCKED, every row is
// published exactly once and keyed by its message key, and rows are removed
// only after the broker acknowledged them.
func TestRelaysSideBySidePublishEveryRowOnce(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	const n = 3000
	fill(t, s, n)
	for range 3 {
		start(t, s, k, outboxrelay.Config{BatchSize: 50})
	}
	waitEmpty(t, s, 30*time.Second)
	recs := consume(t, k, n)
	requireEachOnce(t, recs, n)
}

// One relay keeps several batches in flight yet hands records to the
// producer in claim order: a key's records reach its partition in outbox
// order. Fails if batches are published concurrently or out of order.
func TestOneRelayKeepsEachKeyInOutboxOrder(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	const n = 4000
	fill(t, s, n)
	start(t, s, k, outboxrelay.Config{BatchSize: 25, InFlight: 8})
	// 160 batches with acks=all: on a real three-broker cluster sharing two
	// cores with the rest of the suite this takes tens of seconds. A bound
	// on liveness, not a speed check.
	waitEmpty(t, s, 2*time.Minute)
	recs := consume(t, k, n)
	requireEachOnce(t, recs, n)
	last := map[string]published{}
	for _, r := range recs {
		if prev, ok := last[r.key]; ok && prev.offset < r.offset {
			require.Less(t, prev.seq, r.seq, "key %s: seq %d after %d", r.key, r.seq, prev.seq)
		}
		last[r.key] = r
	}
}

// Ids are taken at insert and commit in another order. A row whose
// transaction commits after higher ids were already relayed still goes out:
// the relay never keeps a cursor over ids.
func TestRowCommittedAfterHigherIDsStillGoesOut(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	ctx := t.Context()
	held, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	defer held.Rollback(context.WithoutCancel(ctx))
	var heldID int64
	require.NoError(t, held.QueryRow(ctx, `INSERT INTO outbox (message_key, message) VALUES ('k/held', '{"seq": 1}') RETURNING id`).Scan(&heldID))
	_, err = s.Pool.Exec(ctx, `
INSERT INTO outbox (message_key, message) SELECT 'k/' || g, jsonb_build_object('seq', g) FROM generate_series(2, 101) g`)
	require.NoError(t, err)
	var minOther int64
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT min(id) FROM outbox`).Scan(&minOther))
	require.Greater(t, minOther, heldID)

	start(t, s, k, outboxrelay.Config{BatchSize: 10, PollInterval: 20 * time.Millisecond})
	waitEmpty(t, s, 20*time.Second) // the higher ids went out; the held row is invisible
	require.NoError(t, held.Commit(ctx))
	waitEmpty(t, s, 20*time.Second)
	requireEachOnce(t, consume(t, k, 101), 101)
}

// hangingPublisher never answers: the relay using it is stuck mid-batch.
type hangingPublisher struct{ handed atomic.Int64 }

func (p *hangingPublisher) Publish(context.Context, *kgo.Record, func(*kgo.Record, error)) {
	p.handed.Add(1)
}

// A relay that dies mid-batch (its connections are gone, as when the process
// is killed) loses nothing: Postgres rolls its claim back and another relay
// publishes every row.
func TestKilledRelayLosesNothing(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	const n = 500
	fill(t, s, n)

	// The doomed relay has a pool of its own, so its backends can be killed.
	doomedPool, err := db.Open(t.Context(), dbtest.URL(), db.Options{MaxConns: 4, SearchPath: s.Name, ApplicationName: s.Name + "_doomed"})
	require.NoError(t, err)
	defer doomedPool.Close()
	hang := &hangingPublisher{}
	doomed, err := outboxrelay.New(doomedPool, logger(t), outboxrelay.Config{Publisher: hang, BatchSize: 100, InFlight: 2, ProduceTimeout: time.Hour, NoListen: true})
	require.NoError(t, err)
	dctx, dcancel := context.WithCancel(context.Background())
	defer dcancel()
	go func() { _ = doomed.Run(dctx) }()
	require.Eventually(t, func() bool { return hang.handed.Load() == 200 }, 20*time.Second, 5*time.Millisecond)

	// A healthy relay cannot take the claimed rows.
	start(t, s, k, outboxrelay.Config{BatchSize: 50, PollInterval: 20 * time.Millisecond})
	require.Eventually(t, func() bool { return count(t, s) == 200 }, 20*time.Second, 10*time.Millisecond)

	var killed int
	require.NoError(t, s.Pool.QueryRow(t.Context(), `
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, s.Name+"_doomed").Scan(&killed))
	require.Positive(t, killed)
	dcancel()
	waitEmpty(t, s, 20*time.Second)
	requireEachOnce(t, consume(t, k, n), n)
}

// A relay that is alive but stuck (frozen process, hung broker call) does
// not hold its claim forever: the claim expires after ClaimTimeout and
// another relay publishes the rows.
func TestStuckRelayClaimExpires(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	const n = 300
	fill(t, s, n)
	hang := &hangingPublisher{}
	start(t, s, k, outboxrelay.Config{Publisher: hang, BatchSize: 100, InFlight: 3, ProduceTimeout: time.Hour,
		ClaimTimeout: time.Second, NoListen: true, PollInterval: time.Hour})
	require.Eventually(t, func() bool { return hang.handed.Load() == n }, 20*time.Second, 5*time.Millisecond)
	start(t, s, k, outboxrelay.Config{BatchSize: 50, PollInterval: 20 * time.Millisecond})
	waitEmpty(t, s, 30*time.Second)
	requireEachOnce(t, consume(t, k, n), n)
}

// While the broker drops every produce request, rows stay in the outbox and
// the backlog metrics show them; once it is back, every row goes out, once:
// the relay waits for the producer's answer instead of rolling back under
// records still in flight.
func TestBrokerOutageKeepsRowsAndDrainsAfter(t *testing.T) {
	t.Parallel()
	kafkatest.SkipOnReal(t, "brokerfault.TestBrokerStoppedForAMinuteLosesNothing (e2e/brokerfault)")
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	var down atomic.Bool
	down.Store(true)
	var refused atomic.Int64
	k.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if down.Load() {
			refused.Add(1)
			return nil, errors.New("broker down"), true // drops the connection
		}
		return nil, nil, false
	})
	const n = 1000
	fill(t, s, n)
	reg := prometheus.NewRegistry()
	start(t, s, k, outboxrelay.Config{BatchSize: 100, ProduceTimeout: time.Second, // the client's minimum
		MaxBackoff: 200 * time.Millisecond, Registerer: reg})
	require.Eventually(t, func() bool { return refused.Load() >= 1 }, 20*time.Second, 10*time.Millisecond)
	time.Sleep(1500 * time.Millisecond) // past the produce timeout: the producer keeps retrying in-flight records
	require.Equal(t, n, count(t, s), "rows left the outbox while the broker was down")
	require.Equal(t, float64(n), metric(t, reg, "hookyard_outbox_backlog_rows"))
	require.Positive(t, metric(t, reg, "hookyard_outbox_oldest_age_seconds"))
	require.Zero(t, metric(t, reg, "hookyard_outbox_published_total"), "rows counted as published while the broker was down")

	down.Store(false)
	waitEmpty(t, s, 30*time.Second)
	// The last batch's COMMIT is visible before its goroutine counts it
	// (finish: settle, then published.Add).
	require.Eventually(t, func() bool { return metric(t, reg, "hookyard_outbox_published_total") >= n }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, float64(n), metric(t, reg, "hookyard_outbox_published_total"))
	require.Zero(t, metric(t, reg, "hookyard_outbox_backlog_rows"))
	requireEachOnce(t, consume(t, k, n), n)
}

// An insert wakes an idle relay through LISTEN/NOTIFY: with a poll interval
// of an hour, the row still goes out at once. Fails without the listener or
// without the trigger.
func TestInsertWakesIdleRelay(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	reg := prometheus.NewRegistry()
	start(t, s, k, outboxrelay.Config{PollInterval: time.Hour, Registerer: reg})
	for i := 1; i <= 3; i++ {
		// Let the relay go idle (it polls once at start) before the insert.
		time.Sleep(200 * time.Millisecond)
		_, err := s.Pool.Exec(t.Context(), `INSERT INTO outbox (message_key, message) VALUES ('k', jsonb_build_object('seq', $1::int))`, i)
		require.NoError(t, err)
		waitEmpty(t, s, 10*time.Second)
	}
	requireEachOnce(t, consume(t, k, 3), 3)
}

// Without LISTEN the relay still finds rows by polling.
func TestRelayPollsWithoutNotifications(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	start(t, s, k, outboxrelay.Config{PollInterval: 50 * time.Millisecond, NoListen: true})
	time.Sleep(100 * time.Millisecond)
	fill(t, s, 10)
	waitEmpty(t, s, 10*time.Second)
	requireEachOnce(t, consume(t, k, 10), 10)
}

// metric is the value of a relay metric, which must be registered.
func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, found, err := promread.Sum(reg, name, nil)
	require.NoError(t, err)
	require.True(t, found, "metric %s not found", name)
	return v
}

// With the broker gone after the relay reached its topic, the producer
// gives up on the records after the produce timeout: the batch is rolled
// back, the failure counted, and the rows stay in the outbox.
func TestUnreachableBrokerCountsFailuresAndKeepsRows(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	// Not Kafka but an address that stops answering: kfake even under
	// KAFKA_BROKERS, since a shared real cluster cannot be closed.
	k := kafkatest.NewFake(t, 1)
	reg := prometheus.NewRegistry()
	r, _ := start(t, s, k, outboxrelay.Config{ProduceTimeout: time.Second, MaxBackoff: 200 * time.Millisecond, Registerer: reg})
	require.Eventually(t, func() bool { return r.Check(context.Background()) == nil }, 30*time.Second, 10*time.Millisecond)
	k.Close()
	const n = 50
	fill(t, s, n)
	require.Eventually(t, func() bool { return metric(t, reg, "hookyard_outbox_publish_failures_total") >= 2 }, 30*time.Second, 20*time.Millisecond)
	require.Equal(t, n, count(t, s))
	require.Zero(t, metric(t, reg, "hookyard_outbox_published_total"))
}

// flakyPublisher fails, once each, the records whose key is in fail, fails
// for good those whose key is in refuse, and acknowledges everything else
// at once.
type flakyPublisher struct {
	mu     sync.Mutex
	fail   map[string]bool
	refuse map[string]bool
	acked  map[string]int
}

func (p *flakyPublisher) Publish(_ context.Context, r *kgo.Record, done func(*kgo.Record, error)) {
	p.mu.Lock()
	k := string(r.Key)
	failNow, refuse := p.fail[k], p.refuse[k]
	delete(p.fail, k)
	if !failNow && !refuse {
		p.acked[string(r.Value)]++
	}
	p.mu.Unlock()
	switch {
	case refuse:
		done(r, kerr.MessageTooLarge)
	case failNow:
		done(r, errors.New("partition timed out"))
	default:
		done(r, nil)
	}
}

// When some records of a batch fail and others are acknowledged, only the
// failed rows go back to the outbox (and out again on the next claim); the
// acknowledged ones are not published twice. Fails if a partial failure
// rolls the whole batch back.
func TestPartlyFailedBatchKeepsOnlyTheFailedRows(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	const n = 200
	fill(t, s, n)
	pub := &flakyPublisher{acked: map[string]int{}, refuse: map[string]bool{}, fail: map[string]bool{
		"stripe/acct/test/subscription/sub_3": true, "stripe/acct/test/subscription/sub_11": true}}
	reg := prometheus.NewRegistry()
	// One batch takes every row.
	start(t, s, nil, outboxrelay.Config{Publisher: pub, BatchSize: n, InFlight: 1, NoListen: true, PollInterval: 20 * time.Millisecond, Registerer: reg})
	waitEmpty(t, s, 10*time.Second)
	require.Eventually(t, func() bool { return metric(t, reg, "hookyard_outbox_published_total") == n }, 10*time.Second, 5*time.Millisecond)
	require.Equal(t, 1.0, metric(t, reg, "hookyard_outbox_publish_failures_total"))
	pub.mu.Lock()
	defer pub.mu.Unlock()
	require.Len(t, pub.acked, n)
	for v, c := range pub.acked {
		require.Equal(t, 1, c, "%s acknowledged %d times", v, c)
	}
}

// A record the broker refuses for good (too large) does not sit at the head
// of the outbox failing every batch: its row moves to outbox_dead with the
// broker's error, the other rows go out once, and the relay does not back
// off for it. Fails if poisonous records are put back or dropped.
func TestRefusedRecordMovesToOutboxDead(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	const n = 300
	fill(t, s, n)
	poisoned := "stripe/acct/test/subscription/sub_5"
	var want int
	require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox WHERE message_key = $1`, poisoned).Scan(&want))
	pub := &flakyPublisher{acked: map[string]int{}, fail: map[string]bool{}, refuse: map[string]bool{poisoned: true}}
	reg := prometheus.NewRegistry()
	start(t, s, nil, outboxrelay.Config{Publisher: pub, BatchSize: 50, NoListen: true, PollInterval: 20 * time.Millisecond, Registerer: reg})
	waitEmpty(t, s, 10*time.Second)

	var dead int
	var errText string
	require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*), min(error) FROM outbox_dead WHERE message_key = $1`, poisoned).Scan(&dead, &errText))
	require.Equal(t, want, dead, "every refused row is kept in outbox_dead")
	require.Contains(t, errText, "MESSAGE_TOO_LARGE")
	require.Equal(t, float64(want), metric(t, reg, "hookyard_outbox_dead_total"))
	require.Equal(t, float64(n-want), metric(t, reg, "hookyard_outbox_published_total"))
	require.Zero(t, metric(t, reg, "hookyard_outbox_publish_failures_total"), "a refused record is not a broker failure")
	pub.mu.Lock()
	defer pub.mu.Unlock()
	require.Len(t, pub.acked, n-want)
}

// A row moved to outbox_dead a second time (an operator copied it back
// without deleting it from outbox_dead, and the broker still refuses it)
// updates its dead row instead of failing the batch, so the rows claimed
// with it still go out.
func TestRowRefusedAgainAfterCopyBackUpdatesItsDeadRow(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	const n = 100
	fill(t, s, n)
	poisoned := "stripe/acct/test/subscription/sub_5"
	pub := &flakyPublisher{acked: map[string]int{}, fail: map[string]bool{}, refuse: map[string]bool{poisoned: true}}
	reg := prometheus.NewRegistry()
	start(t, s, nil, outboxrelay.Config{Publisher: pub, BatchSize: 50, NoListen: true, PollInterval: 20 * time.Millisecond, Registerer: reg})
	waitEmpty(t, s, 10*time.Second)
	deadRows := func() int {
		var n int
		require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox_dead`).Scan(&n))
		return n
	}
	dead := deadRows()
	require.Positive(t, dead)

	// The operator's copy back, without the DELETE, together with new rows.
	_, err := s.Pool.Exec(t.Context(), `INSERT INTO outbox (id, message_key, message, created_at) SELECT id, message_key, message, created_at FROM outbox_dead`)
	require.NoError(t, err)
	fill(t, s, n)
	waitEmpty(t, s, 10*time.Second)
	require.Equal(t, 2*dead, deadRows(), "one dead row per outbox row, the copied-back ones updated")
	require.Zero(t, metric(t, reg, "hookyard_outbox_publish_failures_total"), "the second move failed no batch")
	pub.mu.Lock()
	defer pub.mu.Unlock()
	acked := 0
	for _, c := range pub.acked {
		acked += c
	}
	require.Equal(t, 2*(n-dead), acked, "every other row went out once per insert")
}
