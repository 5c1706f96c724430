package outboxrelay

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/topic"
)

// partitionsAgree says whether the topic's partition count is the one the
// fences recorded, checking at most every PartitionCheckInterval. Partitions
// added under running services (an admin tool, an autoscaler, `fence resize
// -force`) move keys to other partitions while their backlog sits on the old
// ones; publishing then would hand one resource to two workers with
// independent fences. Until the fences record the new count, rows wait in
// the outbox. With no Kafka client (a Publisher of the caller's) there is no
// topic to compare.
func (r *Relay) partitionsAgree(ctx context.Context, admin *kgo.Client) bool {
	if admin == nil || time.Since(r.checkedAt) < r.cfg.PartitionCheckInterval {
		return r.agree
	}
	r.checkedAt = time.Now()
	var recorded int
	err := r.pool.QueryRow(ctx, `SELECT partition_count FROM topic_fence WHERE topic = $1`, r.cfg.Topic).Scan(&recorded)
	if errors.Is(err, pgx.ErrNoRows) {
		// No processor registered the topic yet: nothing to disagree with.
		r.recorded.Store(0)
		r.setAgree(ctx, true, 0, 0)
		return true
	}
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "read the recorded partition count; keeping the last verdict", slog.String("error", err.Error()))
		}
		return r.agree
	}
	if r.recorded.Swap(int64(recorded)) != int64(recorded) {
		// The producer hashes over the count in its own metadata, which it
		// refreshes only every few minutes: have it read the topic now, or
		// the partitioner would refuse every record until then.
		admin.ForceMetadataRefresh()
	}
	n, err := topic.Partitions(ctx, admin, r.cfg.Topic)
	if err != nil {
		if ctx.Err() == nil {
			r.log.WarnContext(ctx, "read the topic's partition count; keeping the last verdict", slog.String("error", err.Error()))
		}
		return r.agree
	}
	r.setAgree(ctx, n == recorded, n, recorded)
	return r.agree
}

func (r *Relay) setAgree(ctx context.Context, agree bool, n, recorded int) {
	switch {
	case !agree && r.agree:
		r.log.ErrorContext(ctx, "refusing to publish: the topic's partition count differs from the one the fences recorded; rows stay in the outbox until `hookyard fence resize` records it (see the README's \"Resizing the topic\")",
			slog.String("topic", r.cfg.Topic), slog.Int("partitions", n), slog.Int("recorded", recorded))
		r.countChanged.Set(1)
	case agree && !r.agree:
		r.log.InfoContext(ctx, "the topic's partition count matches the recorded one again; publishing", slog.Int("partitions", n))
		r.countChanged.Set(0)
	}
	r.agree = agree
}

// fencedPartitioner hashes keys as Kafka's default partitioner does
// (murmur2), over the partition count the fences recorded only. Between two
// checks the producer's metadata may already show a grown topic; a record
// it would hash over that count fails instead (its row goes back to the
// outbox).
//
// Only the events topic is fenced: processors own its partitions. Other
// topics (the compacted changes topic) are hashed the same way over their
// own count, which keeps each key on one partition while it does not change.
type fencedPartitioner struct {
	topic    string
	recorded *atomic.Int64
}

func (p fencedPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	if t != p.topic {
		return kgo.StickyKeyPartitioner(nil).ForTopic(t)
	}
	return fencedTopicPartitioner{recorded: p.recorded, TopicPartitioner: kgo.StickyKeyPartitioner(nil).ForTopic(t)}
}

type fencedTopicPartitioner struct {
	recorded *atomic.Int64
	kgo.TopicPartitioner
}

func (p fencedTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if want := p.recorded.Load(); want > 0 && int64(n) != want {
		return -1 // franz-go fails the record: "invalid record partitioning choice"
	}
	return p.TopicPartitioner.Partition(r, n)
}
