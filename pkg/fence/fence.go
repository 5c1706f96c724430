// Package fence owns partition_fence and topic_fence: the generation a
// processor takes for a partition when it is assigned, and the check every
// write makes inside its own transaction.
//
// Partition fencing holds only while one resource maps to one partition, so
// the topic's partition count is part of the fence: Take refuses a topic whose
// size differs from the recorded one until Resize records the new size and
// bumps every generation.
package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

var (
	// ErrFenced: the partition was taken over since the writer took its
	// generation; the writer must stop and write nothing.
	ErrFenced = errors.New("partition fenced: a newer owner took it over")
	// ErrPartitionCountChanged: the topic's partition count differs from the
	// one recorded with the generations; run `hookyard fence resize`.
	ErrPartitionCountChanged = errors.New("topic partition count differs from the fenced count")
	// ErrBusy: a take waited TakeLockTimeout for a lock another
	// transaction holds (a writer's fence check, or an orphan whose host
	// died, until the server ends it); the caller retries.
	ErrBusy = errors.New("fence take waited too long for a lock")
)

// HolderIdleTimeout is how long a transaction that took the fence's lock
// (Check, QueueCheck, Take) may sit idle before Postgres ends its session
// (idle_in_transaction_session_timeout, set for that transaction only).
// When a writer's host dies mid-transaction no FIN reaches Postgres, and
// without this bound its backend would hold the FOR SHARE lock until TCP
// keepalive gives up (about two hours) while the new owner's Take waits.
// A writer's transaction never idles on purpose: it sends its statements
// back to back, with no network call in between.
const HolderIdleTimeout = 10 * time.Second

// TakeLockTimeout bounds how long Take waits for a lock (lock_timeout, set
// for its transaction only) before it fails with ErrBusy, so a caller in a
// rebalance callback is never stuck behind a lock for longer.
const TakeLockTimeout = 5 * time.Second

// lockNotAvailable is SQLSTATE 55P03, what lock_timeout ends a wait with.
const lockNotAvailable = "55P03"

// boundSQL bounds the current transaction: how long it may idle while it
// holds a lock, and how long each statement may wait for one.
const boundSQL = `SELECT set_config('idle_in_transaction_session_timeout', $1, true), set_config('lock_timeout', $2, true)`

func millis(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) + "ms" }

// Token is a writer's claim on a partition.
type Token struct {
	Topic      string
	Partition  int32
	Generation int64
}

// Querier is what Check needs: a transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Register records the topic's partition count the first time a processor
// sees the topic, and fails when it differs from the recorded one.
func Register(ctx context.Context, pool *pgxpool.Pool, topic string, partitions int) error {
	var recorded int
	err := pool.QueryRow(ctx, `
INSERT INTO topic_fence (topic, partition_count) VALUES ($1, $2)
ON CONFLICT (topic) DO UPDATE SET topic = EXCLUDED.topic
RETURNING partition_count`, topic, partitions).Scan(&recorded)
	if err != nil {
		return fmt.Errorf("register topic fence: %w", err)
	}
	if recorded != partitions {
		return fmt.Errorf("%w: topic %s has %d partitions, fence recorded %d", ErrPartitionCountChanged, topic, partitions, recorded)
	}
	return nil
}

// Take bumps the partition's generation and returns it. Every write made
// under an older generation fails its Check from now on. It also re-checks
// the partition count, inside the same transaction, so a resize cannot slip
// between the check and the take.
func Take(ctx context.Context, pool *pgxpool.Pool, topic string, partition int32, partitions int, owner string) (Token, error) {
	tok := Token{Topic: topic, Partition: partition}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, boundSQL, millis(HolderIdleTimeout), millis(TakeLockTimeout)); err != nil {
			return fmt.Errorf("bound the take's transaction: %w", err)
		}
		var recorded int
		if err := tx.QueryRow(ctx, `SELECT partition_count FROM topic_fence WHERE topic = $1 FOR SHARE`, topic).Scan(&recorded); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: topic %s not registered", ErrPartitionCountChanged, topic)
			}
			return err
		}
		if recorded != partitions {
			return fmt.Errorf("%w: topic %s has %d partitions, fence recorded %d", ErrPartitionCountChanged, topic, partitions, recorded)
		}
		return tx.QueryRow(ctx, `
INSERT INTO partition_fence (topic, partition, generation, owner) VALUES ($1, $2, 1, $3)
ON CONFLICT (topic, partition) DO UPDATE
SET generation = partition_fence.generation + 1, owner = EXCLUDED.owner, taken_at = now()
RETURNING generation`, topic, partition, owner).Scan(&tok.Generation)
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable {
		return tok, fmt.Errorf("take fence for %s/%d: %w: %w", topic, partition, ErrBusy, err)
	}
	if err != nil {
		return tok, fmt.Errorf("take fence for %s/%d: %w", topic, partition, err)
	}
	return tok, nil
}

// Check fails with ErrFenced when the partition's generation moved past the
// token's. It must run inside the transaction whose writes it guards: the
// FOR SHARE lock makes a concurrent Take wait until that transaction ends,
// so no take-over can interleave between the check and the commit. It
// bounds the transaction's idle time by HolderIdleTimeout first, so that
// lock cannot outlive a dead writer for long.
func Check(ctx context.Context, q Querier, tok Token) error {
	var idle string
	if err := q.QueryRow(ctx, idleSQL, millis(HolderIdleTimeout)).Scan(&idle); err != nil {
		return fmt.Errorf("bound the fenced transaction: %w", err)
	}
	return compare(q.QueryRow(ctx, checkSQL, tok.Topic, tok.Partition), tok)
}

// Resize records a new partition count for topic and bumps every
// generation, so no writer from before the resize can write. Run it only
// after the processors were drained (see "Resizing the topic" in
// docs/operations.md).
func Resize(ctx context.Context, pool *pgxpool.Pool, topic string, partitions int) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `
INSERT INTO topic_fence (topic, partition_count) VALUES ($1, $2)
ON CONFLICT (topic) DO UPDATE SET partition_count = EXCLUDED.partition_count, recorded_at = now()`, topic, partitions); err != nil {
			return fmt.Errorf("record partition count: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE partition_fence SET generation = generation + 1, owner = 'resize', taken_at = now() WHERE topic = $1`, topic); err != nil {
			return fmt.Errorf("bump generations: %w", err)
		}
		return nil
	})
}

// Partition is one partition's fence as `hookyard fence status` shows it.
type Partition struct {
	Partition  int32     `json:"partition"`
	Generation int64     `json:"generation"`
	Owner      string    `json:"owner"`
	TakenAt    time.Time `json:"taken_at"`
}

// Partitions lists the fences taken on topic, by partition. A partition
// nobody took yet has no row, so a fresh topic lists none (a nil slice).
func Partitions(ctx context.Context, pool *pgxpool.Pool, topic string) ([]Partition, error) {
	rows, err := pool.Query(ctx, `SELECT partition, generation, owner, taken_at FROM partition_fence WHERE topic = $1 ORDER BY partition`, topic)
	if err != nil {
		return nil, fmt.Errorf("list partition fences of %s: %w", topic, err)
	}
	var parts []Partition
	for rows.Next() {
		var p Partition
		if err := rows.Scan(&p.Partition, &p.Generation, &p.Owner, &p.TakenAt); err != nil {
			return nil, fmt.Errorf("list partition fences of %s: %w", topic, err)
		}
		parts = append(parts, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list partition fences of %s: %w", topic, err)
	}
	return parts, nil
}

// RecordedCount returns the partition count recorded for topic by Register
// or Resize; ok is false while none is recorded (no processor has seen the
// topic yet).
func RecordedCount(ctx context.Context, pool *pgxpool.Pool, topic string) (n int, ok bool, err error) {
	err = pool.QueryRow(ctx, `SELECT partition_count FROM topic_fence WHERE topic = $1`, topic).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read the recorded partition count: %w", err)
	}
	return n, true, nil
}

const checkSQL = `SELECT generation FROM partition_fence WHERE topic = $1 AND partition = $2 FOR SHARE`

// idleSQL bounds the idle time of a writer's transaction; its lock_timeout
// is the writer's to choose.
const idleSQL = `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`

// QueueCheck queues Check as the first statements of a batch sent inside
// the transaction it guards; the batch's Close returns ErrFenced when it
// fails.
func QueueCheck(b *pgx.Batch, tok Token) {
	b.Queue(idleSQL, millis(HolderIdleTimeout)).Exec(func(pgconn.CommandTag) error { return nil })
	b.Queue(checkSQL, tok.Topic, tok.Partition).QueryRow(func(row pgx.Row) error {
		return compare(row, tok)
	})
}

func compare(row pgx.Row, tok Token) error {
	var gen int64
	if err := row.Scan(&gen); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %s/%d has no fence", ErrFenced, tok.Topic, tok.Partition)
		}
		return fmt.Errorf("check fence for %s/%d: %w", tok.Topic, tok.Partition, err)
	}
	if gen != tok.Generation {
		return fmt.Errorf("%w: %s/%d generation %d, writer holds %d", ErrFenced, tok.Topic, tok.Partition, gen, tok.Generation)
	}
	return nil
}
