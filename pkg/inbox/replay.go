package inbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
)

// Why ReplayEvents left an event alone.
const (
	// SkipNotInInbox: the message names no inbox row (a purged or foreign
	// record; nothing to reset).
	SkipNotInInbox = "not_in_inbox"
	// SkipIgnored: the event is outside its endpoint's allow-list; it was
	// never processed and a replay does not start now.
	SkipIgnored = "ignored"
	// SkipBusy: another transaction held the row (a processor marking it, a
	// concurrent replay); the caller may try again.
	SkipBusy = "busy"
	// SkipPurged: the retention purge dropped the event's payload, so there
	// is nothing left to apply.
	SkipPurged = "purged"
)

// replayManySQL picks the listed events; rows another transaction holds are
// skipped rather than waited for, so a replay never deadlocks with a
// processor marking a batch in another order.
const replayManySQL = `
SELECT w.provider, w.source_account, w.environment, w.event_id
FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS k(provider, source_account, environment, event_id)
JOIN webhook_inbox w ON w.provider = k.provider AND w.source_account = k.source_account
  AND w.environment = k.environment AND w.event_id = k.event_id
WHERE w.status <> 'ignored'
FOR UPDATE OF w SKIP LOCKED`

const replayedReturning = `
RETURNING message::jsonb->>'provider', message::jsonb->>'source_account', message::jsonb->>'environment', message::jsonb->>'event_id'`

const statusManySQL = `
SELECT w.provider, w.source_account, w.environment, w.event_id, w.status,
       NOT ` + hasBodySQL + `
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS k(provider, source_account, environment, event_id)
JOIN webhook_inbox w ON w.provider = k.provider AND w.source_account = k.source_account
  AND w.environment = k.environment AND w.event_id = k.event_id`

// ReplayEvents re-enqueues each listed event whatever its status (as Replay
// does, in one statement) and returns how many it replayed and, for every
// other key, why not (SkipNotInInbox, SkipIgnored, SkipPurged, SkipBusy).
func ReplayEvents(ctx context.Context, pool *pgxpool.Pool, keys []Key) (int, map[Key]string, error) {
	skipped := map[Key]string{}
	if len(keys) == 0 {
		return 0, skipped, nil
	}
	p, a, e, id := keyColumns(keys)
	done := make(map[Key]bool, len(keys))
	_, err := probed(ctx, pool, func(rows pgx.Rows) error {
		for rows.Next() {
			var k Key
			if err := rows.Scan(&k.Provider, &k.SourceAccount, &k.Environment, &k.EventID); err != nil {
				return err
			}
			done[k] = true
		}
		return rows.Err()
	}, fmt.Sprintf(enqueueSQL, replayManySQL)+replayedReturning, message.ReasonReplay, p, a, e, id)
	if err != nil {
		return 0, nil, fmt.Errorf("replay %d events: %w", len(keys), err)
	}
	if len(done) == len(keys) {
		return len(done), skipped, nil
	}
	// Say why the others were left alone; a row that exists and was not
	// ignored was held by someone else.
	for _, k := range keys {
		if !done[k] {
			skipped[k] = SkipNotInInbox
		}
	}
	_, err = probed(ctx, pool, func(rows pgx.Rows) error {
		for rows.Next() {
			var k Key
			var status string
			var purged bool
			if err := rows.Scan(&k.Provider, &k.SourceAccount, &k.Environment, &k.EventID, &status, &purged); err != nil {
				return err
			}
			if _, ok := skipped[k]; !ok {
				continue
			}
			switch {
			case status == StatusIgnored:
				skipped[k] = SkipIgnored
			case purged:
				skipped[k] = SkipPurged
			default:
				skipped[k] = SkipBusy
			}
		}
		return rows.Err()
	}, statusManySQL, p, a, e, id)
	if err != nil {
		return 0, nil, fmt.Errorf("read status of skipped replays: %w", err)
	}
	return len(done), skipped, nil
}

func keyColumns(keys []Key) (p, a, e, id []string) {
	p, a, e, id = make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys)), make([]string, len(keys))
	for i, k := range keys {
		p[i], a[i], e[i], id[i] = k.Provider, k.SourceAccount, k.Environment, k.EventID
	}
	return p, a, e, id
}

// EnqueueMessages writes msgs to the outbox as they are, each keyed by its
// resource, for the relay to publish. It is for messages that are not an
// inbox event's (a reconciler's "check"): an event goes back through
// ReplayEvents, which resets its row so the processor handles it again.
func EnqueueMessages(ctx context.Context, pool *pgxpool.Pool, msgs []message.Message) (int64, error) {
	if len(msgs) == 0 {
		return 0, nil
	}
	keys, values := make([]string, len(msgs)), make([]string, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return 0, fmt.Errorf("encode outbox message: %w", err)
		}
		keys[i], values[i] = m.Resource.Key(), string(b)
	}
	tag, err := pool.Exec(ctx, `INSERT INTO outbox (message_key, message)
SELECT k, v::jsonb FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(k, v, n) ORDER BY n`, keys, values)
	if err != nil {
		return 0, fmt.Errorf("enqueue %d messages: %w", len(msgs), err)
	}
	return tag.RowsAffected(), nil
}
