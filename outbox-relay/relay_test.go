package outboxrelay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/pipelinetest"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/dbtest"
	"github.com/hookyard/hookyard/pkg/kafkatest"
)

func fill(t *testing.T, s *dbtest.Schema, n int) {
	t.Helper()
	_, err := s.Pool.Exec(t.Context(), `
INSERT INTO outbox (message_key, message)
SELECT 'stripe/acct/test/subscription/sub_' || (g % 37), jsonb_build_object('kind', 'event', 'seq', g)
FROM generate_series(1, $1) g`, n)
	require.NoError(t, err)
}

func count(t *testing.T, s *dbtest.Schema) int {
	var n int
	require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox`).Scan(&n))
	return n
}

// Relays run side by side: rows are claimed with SKIP LOCKED, every row is
// published exactly once and keyed by its message key, and rows are removed
// only after the broker acknowledged them.
func TestRelaysSideBySidePublishEveryRowOnce(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 4)
	const n = 2000
	fill(t, s, n)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		r, err := outboxrelay.New(s.Pool, pipelinetest.Logger(t), outboxrelay.Config{Brokers: k.Brokers, Topic: kafkatest.Topic,
			BatchSize: 50, IdleInterval: time.Millisecond, Registerer: prometheus.NewRegistry()})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); require.NoError(t, r.Run(ctx)) }()
	}
	require.Eventually(t, func() bool { return count(t, s) == 0 }, 30*time.Second, 10*time.Millisecond)
	cancel()
	wg.Wait()

	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumeTopics(kafkatest.Topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	seen := map[string]int{}
	partOf := map[string]int32{}
	pctx, pcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer pcancel()
	total := 0
	for total < n && pctx.Err() == nil {
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			total++
			seen[string(r.Value)]++
			key := string(r.Key)
			if p, ok := partOf[key]; ok {
				require.Equal(t, p, r.Partition, "key %s on two partitions", key)
			}
			partOf[key] = r.Partition
		})
	}
	require.Equal(t, n, total)
	require.Len(t, seen, n, "a row was published twice")
	require.Len(t, partOf, 37)
}

// While the broker is unreachable, a batch fails within the produce timeout
// and its rows stay in the outbox.
func TestRowsStayInOutboxWhenBrokerIsDown(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	k := kafkatest.New(t, 1)
	brokers := k.Brokers
	k.Close()
	fill(t, s, 10)
	r, err := outboxrelay.New(s.Pool, pipelinetest.Logger(t), outboxrelay.Config{Brokers: brokers, Topic: kafkatest.Topic,
		ProduceTimeout: time.Second, Registerer: prometheus.NewRegistry()})
	require.NoError(t, err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kafkatest.Topic))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n, err := r.RelayOnce(ctx, cl)
	require.Error(t, err, fmt.Sprint(n))
	require.Zero(t, n)
	require.Equal(t, 10, count(t, s))
}
