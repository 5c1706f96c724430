package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotCommitted is returned by BatchTx.Commit when the server answered
// the COMMIT with anything but COMMIT: the transaction was rolled back.
var ErrNotCommitted = errors.New("transaction not committed")

// BatchTx is a transaction whose BEGIN travels with its first batch and
// whose COMMIT travels with its last, so a transaction of two batches costs
// two round trips instead of four (pgx.BeginFunc sends BEGIN and COMMIT on
// their own). A batch is pipelined and ends with one Sync: after a failed
// statement the server skips the rest of the batch, COMMIT included, and
// the transaction is aborted; Close then rolls it back.
//
//	tx, err := db.BeginBatches(ctx, pool)
//	if err != nil { ... }
//	defer tx.Close(ctx)
//	if err := tx.Send(ctx, first); err != nil { ... }
//	if err := tx.Commit(ctx, last); err != nil { ... }
type BatchTx struct {
	conn  *pgxpool.Conn
	begun bool // BEGIN has been sent
	done  bool // COMMIT succeeded, or the connection was given back
}

// BeginBatches takes a connection from pool for a BatchTx; nothing is sent
// yet.
func BeginBatches(ctx context.Context, pool *pgxpool.Pool) (*BatchTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return &BatchTx{conn: conn}, nil
}

// Send runs b in the transaction, BEGIN first when it is the first batch.
// It returns the first error of the batch (a statement's, or a callback's).
func (t *BatchTx) Send(ctx context.Context, b *pgx.Batch) error {
	if t.done {
		return errors.New("batch transaction already ended")
	}
	if !t.begun {
		b = prepend("BEGIN", b)
		t.begun = true
	}
	return t.conn.SendBatch(ctx, b).Close()
}

// Commit runs b (which may be empty) followed by COMMIT, in one round trip,
// and reports whether the server committed.
func (t *BatchTx) Commit(ctx context.Context, b *pgx.Batch) error {
	if b == nil {
		b = &pgx.Batch{}
	}
	b.Queue("COMMIT").Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("%w: server answered %s", ErrNotCommitted, tag)
		}
		return nil
	})
	if err := t.Send(ctx, b); err != nil {
		return err
	}
	t.done = true
	t.conn.Release()
	return nil
}

// Close rolls back a transaction that did not commit and gives the
// connection back; after Commit it does nothing. A connection left inside a
// transaction (the ROLLBACK failed) is closed by the pool on release.
func (t *BatchTx) Close(ctx context.Context) {
	if t.done {
		return
	}
	t.done = true
	if t.begun && !t.conn.Conn().IsClosed() {
		_, _ = t.conn.Exec(ctx, "ROLLBACK")
	}
	t.conn.Release()
}

// prepend returns a batch of sql followed by b's queries.
func prepend(sql string, b *pgx.Batch) *pgx.Batch {
	out := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(b.QueuedQueries)+1)}
	out.Queue(sql)
	out.QueuedQueries = append(out.QueuedQueries, b.QueuedQueries...)
	return out
}
