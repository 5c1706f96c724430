package outboxrelay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
)

const changesTopic = "hookyard.changes"

// addRow inserts one outbox row for key with seq; topic "" is the events
// topic.
func addRow(t *testing.T, s *dbtest.Schema, key string, seq int, topic string) {
	t.Helper()
	_, err := s.Pool.Exec(t.Context(), `INSERT INTO outbox (message_key, message, topic) VALUES ($1, $2, nullif($3, ''))`,
		key, fmt.Sprintf(`{"seq":%d}`, seq), topic)
	require.NoError(t, err)
}

// sent is one record a logPublisher saw acknowledged.
type sent struct {
	topic, key string
	seq        int
}

// logPublisher acknowledges records in the order it is handed them, after
// gate (when set) is closed, and appends each to a log shared by every
// relay of a test: the order of that log is the order records reached the
// broker.
type logPublisher struct {
	mu   *sync.Mutex
	log  *[]sent
	gate chan struct{}
	// handed counts the records handed to this publisher.
	handed chan struct{}
	fail   map[string]bool // keys failed once each
	refuse map[string]bool // keys refused for good
}

func (p *logPublisher) Publish(_ context.Context, r *kgo.Record, done func(*kgo.Record, error)) {
	if p.handed != nil {
		p.handed <- struct{}{}
	}
	go func() {
		if p.gate != nil {
			<-p.gate
		}
		p.mu.Lock()
		k := string(r.Key)
		failNow, refuse := p.fail[k], p.refuse[k]
		delete(p.fail, k)
		if !failNow && !refuse {
			var m struct{ Seq int }
			_ = json.Unmarshal(r.Value, &m)
			*p.log = append(*p.log, sent{topic: r.Topic, key: k, seq: m.Seq})
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
	}()
}

// A change row is published only after every earlier row of its key left
// the outbox: while one relay still awaits the broker for a resource's
// first change, a second relay that claims the resource's next change
// leaves it in the outbox, and publishes the rows of other keys (and event
// rows, which are not ordered across relays). On a compacted topic the
// later change overtaking the earlier would leave the older state as the
// key's last record. Fails without the NOT EXISTS of claimSQL.
func TestChangeRowWaitsWhileAnEarlierRowOfItsKeyIsHeldByAnotherRelay(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	var mu sync.Mutex
	var log []sent
	const k, other = "stripe/acct/test/subscription/sub_k", "stripe/acct/test/subscription/sub_other"
	addRow(t, s, k, 1, changesTopic)

	gate := make(chan struct{})
	slow := &logPublisher{mu: &mu, log: &log, gate: gate, handed: make(chan struct{}, 10)}
	start(t, s, nil, outboxrelay.Config{Publisher: slow, BatchSize: 1, InFlight: 1, NoListen: true, PollInterval: 20 * time.Millisecond})
	select {
	case <-slow.handed: // the first relay holds k's first change
	case <-time.After(10 * time.Second):
		t.Fatal("the first relay never claimed")
	}
	addRow(t, s, k, 2, changesTopic)
	addRow(t, s, other, 3, changesTopic)
	addRow(t, s, k, 4, "") // an event row of the same key
	fast := &logPublisher{mu: &mu, log: &log}
	start(t, s, nil, outboxrelay.Config{Publisher: fast, BatchSize: 100, NoListen: true, PollInterval: 20 * time.Millisecond})
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(log) >= 2
	}, 10*time.Second, 5*time.Millisecond, "the second relay publishes the other key's change and the event row")
	time.Sleep(200 * time.Millisecond) // a few more claims by the second relay
	mu.Lock()
	require.ElementsMatch(t, []sent{{topic: changesTopic, key: other, seq: 3}, {key: k, seq: 4}}, log,
		"k's second change went out while its first one awaited the broker")
	mu.Unlock()

	close(gate)
	waitEmpty(t, s, 10*time.Second)
	mu.Lock()
	defer mu.Unlock()
	var ks []int
	for _, r := range log {
		if r.key == k && r.topic == changesTopic {
			ks = append(ks, r.seq)
		}
	}
	require.Equal(t, []int{1, 2}, ks)
}

// Change rows put back after a failure, or moved to outbox_dead, keep their
// topic: published again, they go to the changes topic, not to the events
// topic. Fails if settle drops the topic column.
func TestPutBackAndDeadChangeRowsKeepTheirTopic(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	var mu sync.Mutex
	var log []sent
	const flaky, poisoned = "k/flaky", "k/poisoned"
	addRow(t, s, flaky, 1, changesTopic)
	addRow(t, s, poisoned, 2, changesTopic)
	addRow(t, s, "k/fine", 3, "")
	pub := &logPublisher{mu: &mu, log: &log, fail: map[string]bool{flaky: true}, refuse: map[string]bool{poisoned: true}}
	start(t, s, nil, outboxrelay.Config{Publisher: pub, BatchSize: 10, NoListen: true, PollInterval: 20 * time.Millisecond})
	waitEmpty(t, s, 10*time.Second)
	mu.Lock()
	require.ElementsMatch(t, []sent{{topic: changesTopic, key: flaky, seq: 1}, {key: "k/fine", seq: 3}}, log)
	mu.Unlock()
	var topic string
	require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT topic FROM outbox_dead WHERE message_key = $1`, poisoned).Scan(&topic))
	require.Equal(t, changesTopic, topic)
}

// Relays side by side, several batches in flight each, on a real broker
// (kfake, or the cluster of KAFKA_BROKERS): event rows go to the events
// topic and change rows to the changes topic, and on the changes topic each
// key's records are in the order of their rows, each once.
func TestRelaysSideBySideKeepEachKeysChangesInOrder(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	kc := kafkatest.New(t, 4)
	const n = 3000
	_, err := s.Pool.Exec(t.Context(), `
INSERT INTO outbox (message_key, message, topic)
SELECT 'stripe/acct/test/subscription/sub_' || (g % 7), jsonb_build_object('seq', g),
       CASE WHEN g % 3 = 0 THEN NULL ELSE $2 END
FROM generate_series(1, $1) g`, n, kc.ChangesTopic)
	require.NoError(t, err)
	for range 3 {
		start(t, s, kc, outboxrelay.Config{BatchSize: 40, InFlight: 4, ChangesTopic: kc.ChangesTopic})
	}
	waitEmpty(t, s, time.Minute)

	read := func(topic string, want int) []*kgo.Record {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		require.NoError(t, err)
		defer cl.Close()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		var out []*kgo.Record
		for len(out) < want && ctx.Err() == nil {
			out = append(out, cl.PollFetches(ctx).Records()...)
		}
		require.Len(t, out, want, topic)
		return out
	}
	require.Len(t, read(kc.Topic, n/3), n/3)
	last := map[string]int{}
	for _, r := range read(kc.ChangesTopic, n-n/3) {
		var m struct{ Seq int }
		require.NoError(t, json.Unmarshal(r.Value, &m))
		require.NotZero(t, m.Seq%3, "an event row on the changes topic")
		require.Greater(t, m.Seq, last[string(r.Key)], "key %s: change %d after %d", r.Key, m.Seq, last[string(r.Key)])
		last[string(r.Key)] = m.Seq
	}
}
