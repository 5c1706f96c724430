// Package processor consumes the events topic as a consumer group, one worker
// per assigned partition, and keeps the projections.
//
// Each worker takes the partition's fencing generation on assignment and
// checks it inside every transaction it commits; it commits Kafka offsets
// only after that transaction committed. Versioned snapshots are applied only
// when the version grows; events without a version are hints, and the worker
// fetches the current resource from the provider with no transaction open.
// A write that changes a projection queues its change record for the
// compacted changes topic in the same statement (Config.ChangesTopic), so a
// fenced-out or rolled-back write publishes nothing.
// A failing event is parked with attempts, backoff and its last error, and
// comes back through the outbox on the same partition; it never blocks the
// partition. The processor must never let arrival order decide state.
package processor
