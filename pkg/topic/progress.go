package topic

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PartitionProgress is how far a consumer group got on one partition.
type PartitionProgress struct {
	// Known is false when the brokers did not answer for this partition;
	// nothing is decided about it.
	Known bool
	// End is the high watermark when it was read: a record the producer saw
	// acknowledged (acks=all) before that moment lies below it.
	End int64
	// Consumed is the group's committed offset, or the log start offset
	// when that is higher (retention removed what the group never read) or
	// when the group committed nothing: every record below it has been
	// consumed, or is gone.
	Consumed int64
}

// GroupProgress reads a consumer group's progress on a topic.
type GroupProgress struct {
	Client *kgo.Client
	Topic  string
	Group  string
}

// Progress returns one entry per partition of the topic, indexed by
// partition. The end offsets are read before the committed offsets, so a
// group that has consumed a record below End shows Consumed past it.
func (g GroupProgress) Progress(ctx context.Context) ([]PartitionProgress, error) {
	adm := kadm.NewClient(g.Client) // shares the client; closing it would close Client
	ends, err := adm.ListEndOffsets(ctx, g.Topic)
	if err != nil {
		return nil, fmt.Errorf("list end offsets of %s: %w", g.Topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, g.Topic)
	if err != nil {
		return nil, fmt.Errorf("list start offsets of %s: %w", g.Topic, err)
	}
	committed, err := adm.FetchOffsets(ctx, g.Group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("fetch committed offsets of group %s: %w", g.Group, err)
	}
	n := 0
	ends.Each(func(o kadm.ListedOffset) {
		if o.Topic == g.Topic {
			n = max(n, int(o.Partition)+1)
		}
	})
	if n == 0 {
		return nil, fmt.Errorf("list end offsets of %s: %w", g.Topic, kerr.UnknownTopicOrPartition)
	}
	out := make([]PartitionProgress, n)
	for part := range out {
		end, ok := ends.Lookup(g.Topic, int32(part))
		if !ok || end.Err != nil {
			continue
		}
		start, ok := starts.Lookup(g.Topic, int32(part))
		if !ok || start.Err != nil {
			continue
		}
		p := PartitionProgress{Known: true, End: end.Offset, Consumed: start.Offset}
		if o, ok := committed.Lookup(g.Topic, int32(part)); ok && o.Err == nil && o.At > p.Consumed {
			p.Consumed = o.At
		}
		out[part] = p
	}
	return out, nil
}

// PartitionOf is the partition a record keyed key goes to on a topic of n
// partitions with the producer's default partitioner (Kafka's murmur2 of the
// key, as franz-go's default and Kafka's Java client place keyed records).
func PartitionOf(key string, n int) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: []byte(key)}, n))
}
