// Package partition keeps time-partitioned tables covered: it creates the
// partitions ahead of now and drops whole partitions whose range ended
// before a table's horizon. hookyard maintains its partitions itself,
// rather than through pg_partman, so that no extension is needed: managed
// Postgres services offer different extension lists, and the rule here is
// small (fixed-width ranges, one horizon per table).
//
// It owns no table's rows: what must survive a drop is copied out by the
// table's owner in the Table's BeforeDrop hook, in the dropping
// transaction. It must never drop a partition whose range reaches past the
// horizon, never create a DEFAULT partition, and never hold a lock on a
// parent longer than lock_timeout: writers queue behind a waiting DROP.
package partition
