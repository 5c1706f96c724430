package outboxrelay

import (
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Between two partition-count checks the producer's own metadata may
// already show a grown topic: the partitioner then fails the record (its
// row goes back to the outbox) rather than hash its key over a count the
// fences do not know. With the recorded count it partitions exactly as
// Kafka's default (murmur2) does. Fails if records are hashed over any
// count the producer happens to see.
func TestPartitionerRefusesACountOtherThanTheRecordedOne(t *testing.T) {
	t.Parallel()
	var recorded atomic.Int64
	recorded.Store(4)
	tp := fencedPartitioner{topic: "t", recorded: &recorded}.ForTopic("t")
	kafka := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for _, key := range []string{"stripe/acct/test/subscription/sub_1", "a", "b", "chargebee/site/test/subscription/x"} {
		r := &kgo.Record{Key: []byte(key)}
		require.True(t, tp.RequiresConsistency(r))
		require.Equal(t, kafka.Partition(r, 4), tp.Partition(r, 4), key)
		require.Equal(t, -1, tp.Partition(r, 6), "a key hashed over a count the fences do not know")
	}
	recorded.Store(0) // nothing recorded yet: no processor ever ran
	require.Equal(t, kafka.Partition(&kgo.Record{Key: []byte("a")}, 6), tp.Partition(&kgo.Record{Key: []byte("a")}, 6))
}

// The changes topic is no processor's: its partition count is not the
// fences' business, so a change record is hashed over the changes topic's
// own count whatever the events topic's fences recorded. Fails if the fence
// check applies to every topic (change rows would wait in the outbox for a
// count they can never have).
func TestPartitionerFencesOnlyTheEventsTopic(t *testing.T) {
	t.Parallel()
	var recorded atomic.Int64
	recorded.Store(4)
	p := fencedPartitioner{topic: "hookyard.events", recorded: &recorded}
	kafka := kgo.StickyKeyPartitioner(nil).ForTopic("hookyard.changes")
	r := &kgo.Record{Key: []byte("stripe/acct/test/subscription/sub_1")}
	require.Equal(t, kafka.Partition(r, 6), p.ForTopic("hookyard.changes").Partition(r, 6))
	require.Equal(t, -1, p.ForTopic("hookyard.events").Partition(r, 6))
}
