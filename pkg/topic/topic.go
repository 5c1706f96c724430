// Package topic creates the events topic when it is missing and reads its
// partition count. It never changes an existing topic's size: that is an
// operator's decision (`hookyard fence resize`).
package topic

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
	return Partitions(ctx, cl, topic)
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
