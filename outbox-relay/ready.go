package outboxrelay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/topic"
)

// ErrNotReady is Check's answer while the relay waits for its brokers and
// topic.
var ErrNotReady = errors.New("outbox relay not ready")

// topicAttemptTimeout bounds one look at (or creation of) the topic, so a
// broker that accepts connections and never answers is asked again.
const topicAttemptTimeout = 10 * time.Second

// Check is the relay's readiness: ErrNotReady until it reached its topic.
// A relay with a Publisher of the caller's is ready at once.
func (r *Relay) Check(context.Context) error {
	if !r.ready.Load() {
		return fmt.Errorf("%w: waiting for the brokers to answer and topic %s to exist", ErrNotReady, r.cfg.Topic)
	}
	return nil
}

// waitTopic waits up to TopicWait for the brokers to answer and the topic
// to exist, creating it (and the changes topic) when TopicPartitions is set. Exiting on the first
// "connection refused" would make the start order matter and put a relay
// started beside its brokers into a restart loop.
func (r *Relay) waitTopic(ctx context.Context, cl *kgo.Client) error {
	err := topic.Await(ctx, r.cfg.TopicWait, func(ctx context.Context) error {
		attempt, cancel := context.WithTimeout(ctx, topicAttemptTimeout)
		defer cancel()
		if r.cfg.TopicPartitions > 0 {
			if _, err := topic.Ensure(attempt, cl, r.cfg.Topic, r.cfg.TopicPartitions, r.cfg.TopicReplication); err != nil {
				return err
			}
			if r.cfg.ChangesTopic != "" {
				_, err := topic.EnsureCompacted(attempt, cl, r.cfg.ChangesTopic, r.cfg.TopicPartitions, r.cfg.TopicReplication)
				return err
			}
			return nil
		}
		_, err := topic.Partitions(attempt, cl, r.cfg.Topic)
		return err
	}, func(err error, left time.Duration) {
		r.log.WarnContext(ctx, "not ready: waiting for the brokers to answer and the topic to exist; rows wait in the outbox",
			slog.String("topic", r.cfg.Topic), slog.Duration("up_to", left), slog.String("error", err.Error()))
	})
	switch {
	case err == nil:
		r.ready.Store(true)
		return nil
	case ctx.Err() != nil:
		return err
	}
	return fmt.Errorf("wait %s for topic %s: %w", r.cfg.TopicWait, r.cfg.Topic, err)
}
