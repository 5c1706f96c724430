package pipelinetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ChangeRecords reads the whole changes topic from the beginning, in each
// partition's offset order. Call it once the outbox is empty (WaitIdle):
// every change record is then acknowledged by the broker, so the topic's
// end offsets say how many there are; it fails unless it read them all.
func (p *Pipeline) ChangeRecords(t testing.TB) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka.Brokers...), kgo.ConsumeTopics(p.Kafka.ChangesTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, p.Kafka.ChangesTopic)
	require.NoError(t, err)
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	var out []*kgo.Record
	for int64(len(out)) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	require.Equal(t, want, int64(len(out)), "records on the changes topic")
	return out
}
