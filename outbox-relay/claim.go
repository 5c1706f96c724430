package outboxrelay

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
)

// batch is one claim: its transaction has deleted the rows and stays open
// until every record is acknowledged, then commits; on any failure it rolls
// back and the rows are back in the outbox.
type batch struct {
	conn    *pgxpool.Conn
	ids     []int64
	recs    []*kgo.Record
	created []time.Time
	// topics are the rows' own topics, nil for the events topic: a row put
	// back or moved to outbox_dead keeps it.
	topics  []*string
	pending sync.WaitGroup

	mu     sync.Mutex
	err    error   // the first failure a retry may cure
	failed []bool  // by position: the record was not acknowledged
	poison []error // by position: the broker can never take the record
}

func (b *batch) n() int { return len(b.ids) }

// claimSQL takes the lowest ids no other relay holds and deletes them in the
// same statement; the rows stay locked (and invisible to nobody else) until
// the transaction ends. The claimed ids reach the DELETE as one array, so
// it finds them by the primary key: joined as a CTE instead, the planner
// hashed the whole outbox for every batch (on a table without statistics,
// and with them), and each claim cost as much as the backlog was long.
//
// A row with a topic of its own (a projection change, for the compacted
// changes topic) is published only when no earlier row of its key and topic
// is still in the outbox outside this claim: such a row is held by another
// relay (or by this relay's previous batch, still awaiting the broker), or
// was put back after a failure, and publishing the later one first would
// leave the older state as the key's last record after compaction. Ids of
// one resource's changes follow the projection's writes (the write holds
// the projection row's lock until it commits, and takes its id after the
// lock), so "earlier id" is "earlier write". The deferred row stays locked
// until this claim ends, then the next claim takes it. The NOT EXISTS sits
// under an OR, so Postgres cannot turn it into a join and runs it per
// claimed change row, as one probe of outbox_topic_key; the claim is
// MATERIALIZED so that its array is computed once, never once per use.
//
// The probe compares p.id + 0, not p.id: the outbox is a queue, analyzed
// while it is nearly empty, and on statistics that say "empty" every plan
// of the probe looks free. With p.id < o.id the primary key could serve it,
// and the planner took a bitmap scan of every id below the row, once per
// claimed change row (2,000 of them read 600,000 buffers, 0.6 s a claim,
// and the relay fell behind the traffic). With the id out of reach of any
// index, the probe's only index path is outbox_topic_key's (its partial
// predicate and message_key match); the other is a sequential scan
// (TestClaimProbesEachChangeRowsKeyOnAnOutboxAnalyzedEmpty).
const claimSQL = `
WITH claimed AS MATERIALIZED (
    SELECT ARRAY(SELECT id FROM outbox ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) AS ids
)
DELETE FROM outbox o USING claimed c
WHERE o.id = ANY (c.ids)
  AND (o.topic IS NULL OR NOT EXISTS (
      SELECT 1 FROM outbox p
      WHERE p.topic IS NOT NULL AND p.message_key = o.message_key AND p.id + 0 < o.id
        AND p.topic = o.topic AND p.id <> ALL (c.ids)))
RETURNING o.id, o.message_key, o.message, o.created_at, o.topic`

// claimPlanSQL bounds the claim's transaction's idle time ($1).
const claimPlanSQL = `SELECT set_config('idle_in_transaction_session_timeout', $1, true)`

// claim opens a transaction and deletes the next rows no other relay holds,
// in one round trip. On no rows or an error the transaction is already
// closed and the connection released.
func (r *Relay) claim(ctx context.Context) (*batch, error) {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim outbox rows: %w", err)
	}
	b := &batch{conn: conn}
	if err := r.scan(ctx, b); err != nil || b.n() == 0 {
		sctx, cancel := settleCtx(ctx)
		defer cancel()
		_ = b.end(sctx, false)
		return &batch{}, err
	}
	r.batches.Observe(float64(b.n()))
	return b, nil
}

func (r *Relay) scan(ctx context.Context, b *batch) error {
	q := &pgx.Batch{}
	q.Queue("BEGIN")
	q.Queue(claimPlanSQL, r.claimTimeout)
	q.Queue(claimSQL, r.cfg.BatchSize)
	br := b.conn.SendBatch(ctx, q)
	defer br.Close()
	for range 2 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("claim outbox rows: %w", err)
		}
	}
	rows, err := br.Query()
	if err != nil {
		return fmt.Errorf("claim outbox rows: %w", err)
	}
	defer rows.Close()
	type row struct {
		id       int64
		key, msg []byte
		created  time.Time
		topic    *string
	}
	got := make([]row, 0, r.cfg.BatchSize)
	for rows.Next() {
		var rw row
		if err := rows.Scan(&rw.id, &rw.key, &rw.msg, &rw.created, &rw.topic); err != nil {
			return fmt.Errorf("read outbox row: %w", err)
		}
		got = append(got, rw)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("claim outbox rows: %w", err)
	}
	// RETURNING has no order; records go out in outbox order.
	slices.SortFunc(got, func(a, b row) int { return cmp.Compare(a.id, b.id) })
	b.ids = make([]int64, len(got))
	b.recs = make([]*kgo.Record, len(got))
	b.created = make([]time.Time, len(got))
	b.failed = make([]bool, len(got))
	b.poison = make([]error, len(got))
	b.topics = make([]*string, len(got))
	for i, rw := range got {
		b.ids[i] = rw.id
		b.recs[i] = &kgo.Record{Key: rw.key, Value: rw.msg}
		if rw.topic != nil {
			b.recs[i].Topic = *rw.topic
			b.topics[i] = rw.topic
		}
		b.created[i] = rw.created
	}
	return br.Close()
}

// end commits or rolls back the claim's transaction and releases the
// connection (a connection left in a transaction is closed by the pool).
// ctx must outlive the relay's own context: see settleCtx.
func (b *batch) end(ctx context.Context, commit bool) error {
	if b.conn == nil {
		return nil
	}
	conn := b.conn
	b.conn = nil // ended once, whatever happens below
	defer conn.Release()
	if commit {
		_, err := conn.Exec(ctx, "COMMIT")
		return err
	}
	_, err := conn.Exec(ctx, "ROLLBACK")
	return err
}
