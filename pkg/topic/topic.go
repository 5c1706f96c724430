// Package topic creates the events topic and the compacted changes topic
// when they are missing and reads their partition count. It never changes an
// existing topic's size or configuration: that is an operator's decision
// (`hookyard fence resize`, kafka-configs).
package topic

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// visibleTimeout bounds Ensure's wait for a topic it created to be
// described.
const visibleTimeout = 30 * time.Second

// ErrNotCompacted: the changes topic exists with a cleanup policy that
// deletes old records by age or size instead of keeping each key's last
// one, so a consumer reading it from the beginning would miss resources.
var ErrNotCompacted = errors.New("topic is not compacted (cleanup.policy=compact)")

// Ensure creates topic with partitions when it does not exist and returns
// the topic's actual partition count.
func Ensure(ctx context.Context, cl *kgo.Client, topic string, partitions int32, replication int16) (int, error) {
	return ensure(ctx, cl, topic, partitions, replication, nil)
}

// EnsureCompacted is Ensure for a topic that keeps the last record of each
// key (cleanup.policy=compact): the changes topic. An existing topic with
// another policy is an error (ErrNotCompacted); it is never altered.
func EnsureCompacted(ctx context.Context, cl *kgo.Client, topic string, partitions int32, replication int16) (int, error) {
	n, err := ensure(ctx, cl, topic, partitions, replication, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	if err != nil {
		return n, err
	}
	policy, err := CleanupPolicy(ctx, cl, topic)
	if err != nil {
		return n, err
	}
	if !strings.Contains(policy, "compact") {
		return n, fmt.Errorf("topic %s has cleanup.policy=%s: %w", topic, policy, ErrNotCompacted)
	}
	return n, nil
}

// CleanupPolicy returns the topic's cleanup.policy. A topic just created
// (here or by another service) is known to the controller before every
// broker: the broker that answers a describe may not host it yet for a
// moment (UNKNOWN_TOPIC_OR_PARTITION on a real cluster right after the
// create). CleanupPolicy asks again, for up to visibleTimeout, until one
// does.
func CleanupPolicy(ctx context.Context, cl *kgo.Client, topic string) (string, error) {
	wait, cancel := context.WithTimeout(ctx, visibleTimeout)
	defer cancel()
	policy, err := cleanupPolicy(wait, cl, topic)
	for errors.Is(err, kerr.UnknownTopicOrPartition) && wait.Err() == nil {
		select {
		case <-wait.Done():
		case <-time.After(200 * time.Millisecond):
		}
		policy, err = cleanupPolicy(wait, cl, topic)
	}
	return policy, err
}

func cleanupPolicy(ctx context.Context, cl *kgo.Client, topic string) (string, error) {
	rcs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return "", fmt.Errorf("describe configs of topic %s: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return "", fmt.Errorf("describe configs of topic %s: %w", topic, err)
	}
	if rc.Err != nil {
		return "", fmt.Errorf("describe configs of topic %s: %w", topic, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" {
			return c.MaybeValue(), nil
		}
	}
	return "delete", nil // Kafka's default
}

func ensure(ctx context.Context, cl *kgo.Client, topic string, partitions int32, replication int16, configs map[string]*string) (int, error) {
	adm := kadm.NewClient(cl)
	if n, err := Partitions(ctx, cl, topic); err == nil {
		return n, nil
	}
	resp, err := adm.CreateTopic(ctx, partitions, replication, configs, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %s: %w", topic, err)
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("create topic %s: %w", topic, resp.Err)
	}
	if err == nil && resp.Err == nil && resp.NumPartitions > 0 {
		// What the controller created is the answer. A describe may not say
		// so yet: the client keeps the "unknown topic" answer of the describe
		// above for its metadata minimum age (5 s), and a real cluster tells
		// its brokers about a new topic after the create returns.
		return int(resp.NumPartitions), nil
	}
	// Lost a race with another creator (or an old broker that does not
	// answer the count): describe until the topic shows, without failing the
	// service that found it missing a moment ago.
	wait, cancel := context.WithTimeout(ctx, visibleTimeout)
	defer cancel()
	for {
		n, err := Partitions(wait, cl, topic)
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || wait.Err() != nil {
			return n, err
		}
		select {
		case <-wait.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Partitions returns the topic's partition count.
func Partitions(ctx context.Context, cl *kgo.Client, topic string) (int, error) {
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	d, ok := td[topic]
	if !ok {
		return 0, fmt.Errorf("describe topic %s: %w", topic, kerr.UnknownTopicOrPartition)
	}
	if d.Err != nil {
		return 0, fmt.Errorf("describe topic %s: %w", topic, d.Err)
	}
	return len(d.Partitions), nil
}
