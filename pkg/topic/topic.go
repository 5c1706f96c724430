// Package topic creates the events topic when it is missing and reads its
// partition count. It never changes an existing topic's size: that is an
// operator's decision (`hookyard fence resize`).
package topic

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// visibleTimeout bounds Ensure's wait for a topic it created to be
// described.
const visibleTimeout = 30 * time.Second

// Ensure creates topic with partitions when it does not exist and returns
// the topic's actual partition count.
func Ensure(ctx context.Context, cl *kgo.Client, topic string, partitions int32, replication int16) (int, error) {
	adm := kadm.NewClient(cl)
	if n, err := Partitions(ctx, cl, topic); err == nil {
		return n, nil
	}
	resp, err := adm.CreateTopic(ctx, partitions, replication, nil, topic)
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
