package projection

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
)

// changeHead + decision + changeTail (+ a WHERE) + ")" is the
// column that turns a projection write into its change record: the record
// of the row as the upsert left it (the up CTE's RETURNING,
// changeReturning), so the record is the stored projection, not what the
// event proposed, and NULL when the write changed nothing (refused, stale,
// duplicate). The record's fields are message.Change's
// (schemas/change.schema.json).
//
// The write returns its record and Changes.Queue inserts the records of a
// transaction's writes into the outbox in one statement, in the order of
// the writes, later in the same transaction: the records exist exactly
// when the writes committed, under the same fence check, and a rolled-back
// write (fenced) has none. The upsert locked each projection row it wrote,
// and the lock is held until commit, so the outbox ids are taken after it
// and a resource's change rows are numbered in the order of its writes;
// the relay publishes a change row only after every earlier row of its key
// left the outbox (its claimSQL). One INSERT for the batch, where each
// write held its own, spares every write the outbox's insert plan, its
// indexes and its trigger.
const (
	changeHead = `(SELECT json_build_object(
        'provider', $1::text, 'source_account', $2::text, 'environment', $3::text,
        'resource_type', $4::text, 'resource_id', $5::text,
        'decision', '`
	changeTail = `', 'event_id', u.source_event_id, 'fence_generation', u.fence_generation,
        'provider_version', u.provider_version, 'fetch_seq', u.fetch_seq, 'fetched_at', u.fetched_at,
        'status', coalesce(u.status, ''), 'deleted', u.deleted, 'state', u.state,
        'changed_at', u.updated_at)::text
    FROM up u`
	// changeReturning is what up returns for the change column.
	changeReturning = `RETURNING p.provider_version, p.state, p.status, p.deleted, p.source_event_id,
        p.fence_generation, p.fetch_seq, p.fetched_at, p.updated_at`
)

// Changes collects the change records of one transaction's projection
// writes (Write.Changes), in the order their results are read, which is
// the order they were queued; Queue or Insert puts them in the outbox, in
// that transaction, after the writes. A nil *Changes collects nothing.
type Changes struct {
	topic      string
	keys, msgs []string
}

// NewChanges collects change records for topic.
func NewChanges(topic string) *Changes { return &Changes{topic: topic} }

func (c *Changes) add(r message.Resource, change *string) {
	if c != nil && change != nil {
		c.keys, c.msgs = append(c.keys, r.Key()), append(c.msgs, *change)
	}
}

// Len is how many records c holds.
func (c *Changes) Len() int {
	if c == nil {
		return 0
	}
	return len(c.keys)
}

// changesSQL inserts the records in their order: the ids of the outbox's
// sequence are taken row by row as the sorted rows reach the insert.
const changesSQL = `
INSERT INTO outbox (message_key, message, topic)
SELECT k, m, $3::text FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS c(k, m, n)
ORDER BY n`

// Queue queues the insert of the records collected so far on b, and
// forgets them.
func (c *Changes) Queue(b *pgx.Batch) {
	if c.Len() == 0 {
		return
	}
	b.Queue(changesSQL, c.keys, c.msgs, c.topic)
	c.keys, c.msgs = nil, nil
}

// Insert inserts the records collected so far in tx.
func (c *Changes) Insert(ctx context.Context, tx pgx.Tx) error {
	b := &pgx.Batch{}
	c.Queue(b)
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("queue change records: %w", err)
	}
	return nil
}

// Current is the decision of a change record that republishes a stored
// projection (Republish): no write happened, the record says what is.
const Current = "current"

// republishSQL queues a change record of each of the next $6 projections
// after the primary key ($1, …, $5; empty strings for the start), in
// primary-key order, for topic $7, and returns the last key it queued and
// how many it queued. It locks the rows it reads (FOR SHARE): a write of
// the same resource either committed before, and the record shows it, or
// waits for this statement, and its own record gets a later id; so the
// resource's records stay in write order. The walk takes one key at a
// time (LIMIT 1 after the previous one), and locks each row through a
// LATERAL probe: both are the primary key's only sensible plan, where an
// ORDER BY … LIMIT 1000 over a table without statistics reads the whole
// table and sorts it, once per batch.
const republishSQL = `
WITH RECURSIVE walk AS (
    (SELECT p.provider, p.source_account, p.environment, p.resource_type, p.resource_id, 1 AS n
     FROM projection p
     WHERE (p.provider, p.source_account, p.environment, p.resource_type, p.resource_id) > ($1, $2, $3, $4, $5)
     ORDER BY p.provider, p.source_account, p.environment, p.resource_type, p.resource_id
     LIMIT 1)
    UNION ALL
    SELECT nx.provider, nx.source_account, nx.environment, nx.resource_type, nx.resource_id, w.n + 1
    FROM walk w CROSS JOIN LATERAL (
        SELECT p.provider, p.source_account, p.environment, p.resource_type, p.resource_id
        FROM projection p
        WHERE (p.provider, p.source_account, p.environment, p.resource_type, p.resource_id)
            > (w.provider, w.source_account, w.environment, w.resource_type, w.resource_id)
        ORDER BY p.provider, p.source_account, p.environment, p.resource_type, p.resource_id
        LIMIT 1) nx
    WHERE w.n < $6
), batch AS MATERIALIZED (
    SELECT u.* FROM walk w CROSS JOIN LATERAL (
        SELECT p.provider, p.source_account, p.environment, p.resource_type, p.resource_id, p.provider_version,
            p.state, p.status, p.deleted, p.source_event_id, p.fence_generation, p.fetch_seq, p.fetched_at, p.updated_at
        FROM projection p
        WHERE p.provider = w.provider AND p.source_account = w.source_account AND p.environment = w.environment
          AND p.resource_type = w.resource_type AND p.resource_id = w.resource_id
        LIMIT 1
        FOR SHARE) u
), ins AS (
    INSERT INTO outbox (message_key, message, topic)
    SELECT concat_ws('/', u.provider, u.source_account, u.environment, u.resource_type, u.resource_id),
        ` + storedChangeJSON + `, $7::text
    FROM batch u
    ORDER BY u.provider, u.source_account, u.environment, u.resource_type, u.resource_id
)
SELECT provider, source_account, environment, resource_type, resource_id, (SELECT count(*) FROM batch) FROM batch
ORDER BY provider DESC, source_account DESC, environment DESC, resource_type DESC, resource_id DESC LIMIT 1`

// storedChangeJSON is the change record (decision Current) of the stored
// projection row u: what Republish and an erasure (QueueErasedChanges)
// publish.
const storedChangeJSON = `json_build_object(
        'provider', u.provider, 'source_account', u.source_account, 'environment', u.environment,
        'resource_type', u.resource_type, 'resource_id', u.resource_id,
        'decision', '` + Current + `', 'event_id', u.source_event_id, 'fence_generation', u.fence_generation,
        'provider_version', u.provider_version, 'fetch_seq', u.fetch_seq, 'fetched_at', u.fetched_at,
        'status', coalesce(u.status, ''), 'deleted', u.deleted, 'state', u.state,
        'changed_at', u.updated_at)::text`

// RepublishBatchDefault is how many projections Republish queues per
// statement (and transaction).
const RepublishBatchDefault = 1000

// Republish queues a change record (decision Current) of every projection
// for topic, batch at a time, each batch its own transaction, and returns
// how many it queued. It brings the changes topic up to every projection
// that existed before changes were published (an upgrade), or that a
// consumer lost; the relay publishes the records in order with the
// resources' own changes. progress, when set, is called after each batch.
func Republish(ctx context.Context, pool *pgxpool.Pool, topic string, batch int, progress func(done int64)) (int64, error) {
	if topic == "" {
		return 0, fmt.Errorf("republish projections: no changes topic")
	}
	batch = cmp.Or(batch, RepublishBatchDefault)
	var after message.Resource
	var done int64
	for {
		var last message.Resource
		var n int64
		err := pool.QueryRow(ctx, republishSQL, after.Provider, after.SourceAccount, after.Environment, after.Type, after.ID,
			batch, topic).Scan(&last.Provider, &last.SourceAccount, &last.Environment, &last.Type, &last.ID, &n)
		if errors.Is(err, pgx.ErrNoRows) {
			return done, nil
		}
		if err != nil {
			return done, fmt.Errorf("republish projections after %q: %w", after.Key(), err)
		}
		after, done = last, done+n
		if progress != nil {
			progress(done)
		}
	}
}
