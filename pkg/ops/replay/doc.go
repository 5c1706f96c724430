// Package replay reprocesses one partition of the events topic from an
// offset or a point in time, while the consumer group keeps running.
//
// It reads the partition's records directly (assigned partition, no group,
// no commits) up to the high watermark it saw when it started, and sends
// each message back down the normal path: an event's inbox row is reset and
// a fresh outbox row written (as `hookyard replay event` does), any other
// message (a reconciler's "check") is written to the outbox as it is. The
// relay publishes them on their own keys, so the processor that owns the
// partition handles them in order with live traffic, fenced as always.
//
// It must never write a projection or a record to the topic itself, and
// never join the processors' group: that would trigger a rebalance and move
// partitions it has no business with. Replaying old events is harmless
// because versioned writes only move forward and hints re-fetch the current
// state.
package replay
