package projection

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Erased is what an erasure did to the tables of this package, in rows.
type Erased struct {
	// Projections whose state was emptied.
	Projections int64 `json:"projection"`
	// History entries whose detail went.
	History int64 `json:"projection_history"`
	// Divergences deleted.
	Divergences int64 `json:"reconcile_divergence"`
	// Listed states deleted.
	Listed int64 `json:"reconcile_listed"`
}

// eraseSQL is one statement for the four tables, so the erasure of one
// account cannot stop half-way between them. A projection keeps what
// ordering needs and nothing of the provider's object: identity, version,
// status, deleted, fence generation and fetch order stay, so a stale
// snapshot is still refused (a lower version is stale; another snapshot of
// the same version is a conflict and the emptied state stays), and an
// erased resource never moves backwards. History keeps its outcomes,
// versions and statuses; its detail (a provider's error may quote a body)
// goes. Divergences and listed states of the account are deleted.
const eraseSQL = `
WITH p AS (
    UPDATE projection SET state = '{}'::jsonb, updated_at = now()
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
      AND state <> '{}'::jsonb
    RETURNING 1
), h AS (
    UPDATE projection_history SET detail = NULL
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
      AND detail IS NOT NULL
    RETURNING 1
), d AS (
    DELETE FROM reconcile_divergence
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
    RETURNING 1
), l AS (
    DELETE FROM reconcile_listed
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
    RETURNING 1
)
SELECT (SELECT count(*) FROM p), (SELECT count(*) FROM h), (SELECT count(*) FROM d), (SELECT count(*) FROM l)`

// Erase applies an erasure to the projections of account (of provider and
// environment, "" for any; of resourceIDs when some are given), their
// history, divergences and listed states, in tx, and says what it did.
func Erase(ctx context.Context, tx pgx.Tx, provider, account, env string, resourceIDs []string) (Erased, error) {
	var e Erased
	if account == "" {
		return e, fmt.Errorf("erase projections: an account is required")
	}
	if resourceIDs == nil {
		resourceIDs = []string{}
	}
	if err := tx.QueryRow(ctx, eraseSQL, provider, account, env, resourceIDs).Scan(&e.Projections, &e.History, &e.Divergences, &e.Listed); err != nil {
		return e, fmt.Errorf("erase projections of %s: %w", account, err)
	}
	return e, nil
}

// erasedChangesSQL queues, for topic $5, a change record (decision
// Current) of every projection an erasure selects, as stored after it: the
// state emptied, identity, version and status kept. On the compacted
// changes topic the record has the resource's key, so once published it
// is the key's latest record and compaction drops the earlier ones, which
// carried the personal data. It locks the rows (FOR SHARE, after the
// erasure's own update in the same transaction): a write of the resource
// committed before shows in the record, or waits, and its own record gets
// a later outbox id, so the resource's records stay in write order. A
// repeated erasure publishes again: a topic written before erasures
// published is brought up to date too.
const erasedChangesSQL = `
WITH u AS MATERIALIZED (
    SELECT provider, source_account, environment, resource_type, resource_id, provider_version,
        state, status, deleted, source_event_id, fence_generation, fetch_seq, fetched_at, updated_at
    FROM projection
    WHERE ($1 = '' OR provider = $1) AND source_account = $2 AND ($3 = '' OR environment = $3)
      AND (cardinality($4::text[]) = 0 OR resource_id = ANY($4::text[]))
    FOR SHARE
), ins AS (
    INSERT INTO outbox (message_key, message, topic)
    SELECT concat_ws('/', u.provider, u.source_account, u.environment, u.resource_type, u.resource_id),
        ` + storedChangeJSON + `, $5::text
    FROM u
    ORDER BY u.provider, u.source_account, u.environment, u.resource_type, u.resource_id
    RETURNING 1
)
SELECT count(*) FROM ins`

// QueueErasedChanges queues in tx, after Erase, the change record of every
// projection the erasure selected (of account, provider and environment,
// "" for any; of resourceIDs when some are given) for the changes topic,
// and says how many. topic "" queues nothing.
func QueueErasedChanges(ctx context.Context, tx pgx.Tx, provider, account, env string, resourceIDs []string, topic string) (int64, error) {
	if account == "" {
		return 0, fmt.Errorf("publish erased projections: an account is required")
	}
	if topic == "" {
		return 0, nil
	}
	if resourceIDs == nil {
		resourceIDs = []string{}
	}
	var n int64
	if err := tx.QueryRow(ctx, erasedChangesSQL, provider, account, env, resourceIDs, topic).Scan(&n); err != nil {
		return 0, fmt.Errorf("publish erased projections of %s: %w", account, err)
	}
	return n, nil
}
