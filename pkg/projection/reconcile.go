package projection

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The reconciler's statements. Each decides from projections which
// resources to check, and in the same statement writes the checks to the
// outbox and records what diverged in reconcile_divergence: one statement,
// so a round's decision and its writes cannot part. They live here, with
// the table whose rows they decide on.

// Scope is one source's projections of one resource type, and when they
// are stale.
type Scope struct {
	Provider, SourceAccount, Environment, ResourceType string
	// StaleAfter is how long a projection may go unobserved before it is
	// checked.
	StaleAfter time.Duration
	// Terminal are the statuses that are never stale (a canceled
	// subscription does not come back).
	Terminal []string
}

// checkColumns are the outbox columns (key, message) of a reconcile check
// of the projection in the row: a message.KindCheck under the resource's key.
const checkColumns = `concat_ws('/', provider, source_account, environment, resource_type, resource_id),
    jsonb_build_object('kind', 'check', 'provider', provider, 'source_account', source_account,
        'environment', environment, 'resource_type', resource_type, 'resource_id', resource_id,
        'enqueued_at', now(), 'reason', 'reconcile')`

// staleSQL is the condition under which enqueueStaleSQL checks a
// projection p; enqueueListedSQL leaves those to it, so that a round checks
// a resource once.
const staleSQL = `(p.observed_at <= now() - make_interval(secs => $5::float8)
    AND NOT p.deleted AND NOT p.needs_reconcile AND NOT coalesce(p.status = ANY($6::text[]), false))`

// enqueueStaleSQL checks a source's projections not observed for the stale
// age that are not terminal, oldest first, from the database: the
// provider's list is not trusted to show every resource (Stripe's leaves
// canceled subscriptions out unless asked for status=all, and a list can
// lag). It reads the source's range of the primary key; an index on
// observed_at would make every projection write a non-HOT update.
const enqueueStaleSQL = `
WITH due AS (
    SELECT p.provider, p.source_account, p.environment, p.resource_type, p.resource_id
    FROM projection p
    WHERE p.provider = $1 AND p.source_account = $2 AND p.environment = $3 AND p.resource_type = $4
      AND ` + staleSQL + `
    ORDER BY p.observed_at
    LIMIT $7
), ins AS (
    INSERT INTO outbox (message_key, message)
    SELECT ` + checkColumns + ` FROM due
)
SELECT count(*) FROM due`

// EnqueueStale sends a check for each projection of sc not observed for
// sc.StaleAfter that is not terminal, up to limit, oldest first, and says
// how many it sent.
func EnqueueStale(ctx context.Context, pool *pgxpool.Pool, sc Scope, limit int) (int64, error) {
	var n int64
	if err := pool.QueryRow(ctx, enqueueStaleSQL, sc.Provider, sc.SourceAccount, sc.Environment, sc.ResourceType,
		sc.StaleAfter.Seconds(), sc.Terminal, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("enqueue stale projections of %s %s/%s: %w", sc.Provider, sc.SourceAccount, sc.Environment, err)
	}
	return n, nil
}

// enqueueParkedSQL sends a check for each parked projection that has had
// none since it was parked, and again every $2 seconds for providers in $1
// (their checks fetch, and a fetch may fail for a while). It says per
// provider how many it sent and how many were first checks, so a parked
// resource counts as one divergence, not one per round.
const enqueueParkedSQL = `
WITH due AS (
    SELECT provider, source_account, environment, resource_type, resource_id, reconcile_checked_at IS NULL AS first,
           status, deleted, needs_reconcile_reason
    FROM projection
    WHERE needs_reconcile
      AND ($3 = '' OR provider = $3) AND ($4 = '' OR source_account = $4) AND ($5 = '' OR environment = $5)
      AND (reconcile_checked_at IS NULL
           OR (provider = ANY($1::text[]) AND reconcile_checked_at <= now() - make_interval(secs => $2::float8)))
    FOR UPDATE SKIP LOCKED
), upd AS (
    UPDATE projection p SET reconcile_checked_at = now()
    FROM due d
    WHERE p.provider = d.provider AND p.source_account = d.source_account AND p.environment = d.environment
      AND p.resource_type = d.resource_type AND p.resource_id = d.resource_id
), ins AS (
    INSERT INTO outbox (message_key, message)
    SELECT ` + checkColumns + ` FROM due
), div AS (
    INSERT INTO reconcile_divergence (provider, source_account, environment, resource_type, resource_id, kind, projection_says, provider_says)
    SELECT provider, source_account, environment, resource_type, resource_id, 'parked',
           CASE WHEN deleted THEN 'deleted' ELSE status END, coalesce(needs_reconcile_reason, 'parked')
    FROM due WHERE first
    ON CONFLICT (provider, source_account, environment, resource_type, resource_id, kind, provider_says) WHERE resolved_at IS NULL
    DO UPDATE SET last_seen_at = now()
)
SELECT provider, count(*), count(*) FILTER (WHERE first) FROM due GROUP BY provider`

// ParkedChecks selects the parked projections to check.
type ParkedChecks struct {
	// FetchProviders are the providers whose checks fetch: their parked
	// projections are checked again every RecheckAfter, not only once.
	FetchProviders []string
	RecheckAfter   time.Duration
	// Provider, SourceAccount and Environment narrow the selection; empty
	// matches everything.
	Provider, SourceAccount, Environment string
}

// ParkedSent is how many checks of one provider's parked projections were
// sent, and how many of them were the first since the projection was
// parked (a new divergence).
type ParkedSent struct {
	Provider string
	Checks   int64
	First    int64
}

// EnqueueParked sends the checks of the parked projections p selects and
// records each newly parked one as a divergence. On an error it returns
// what it read before it.
func EnqueueParked(ctx context.Context, pool *pgxpool.Pool, p ParkedChecks) ([]ParkedSent, error) {
	rows, err := pool.Query(ctx, enqueueParkedSQL, p.FetchProviders, p.RecheckAfter.Seconds(), p.Provider, p.SourceAccount, p.Environment)
	if err != nil {
		return nil, fmt.Errorf("enqueue parked resources: %w", err)
	}
	var out []ParkedSent
	for rows.Next() {
		var s ParkedSent
		if err := rows.Scan(&s.Provider, &s.Checks, &s.First); err != nil {
			rows.Close()
			return out, fmt.Errorf("enqueue parked resources: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("enqueue parked resources: %w", err)
	}
	return out, nil
}

// resolveUnparkedSQL closes the parked divergences of projections no
// longer parked (a newer version or a check resolved them).
const resolveUnparkedSQL = `
UPDATE reconcile_divergence d SET resolved_at = now()
WHERE d.kind = 'parked' AND d.resolved_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM projection p
                  WHERE p.provider = d.provider AND p.source_account = d.source_account AND p.environment = d.environment
                    AND p.resource_type = d.resource_type AND p.resource_id = d.resource_id AND p.needs_reconcile)`

// ResolveUnparked closes the parked divergences of projections no longer
// parked.
func ResolveUnparked(ctx context.Context, pool *pgxpool.Pool) error {
	if _, err := pool.Exec(ctx, resolveUnparkedSQL); err != nil {
		return fmt.Errorf("resolve unparked divergences: %w", err)
	}
	return nil
}

// Listed is a resource as its provider's listing shows it.
type Listed struct {
	ID     string
	Status string
	// CancelAtPeriodEnd is nil when the listing does not say.
	CancelAtPeriodEnd *bool
	Deleted           bool
	// State is the object as the listing returned it (JSON), or nil when
	// the listing does not carry it. It is then kept in reconcile_listed
	// for the check, which names it, and the processor writes it instead
	// of fetching. Keep only what a projection keeps (KeptFields).
	State []byte
}

// divergedSQL compares each listed resource with its projection and names
// the first way they differ (NULL when in sync). Order matters: a missing
// projection says nothing else, a deletion makes status moot.
const divergedSQL = `
SELECT k.id AS resource_id, p.observed_at IS NULL AS missing, k.state, k.status AS listed_status, k.deleted AS listed_deleted,
    CASE WHEN p.observed_at IS NULL THEN 'missing'
         WHEN k.deleted <> p.deleted THEN 'deleted'
         WHEN p.deleted THEN NULL
         WHEN k.status <> '' AND p.status IS DISTINCT FROM k.status THEN 'status'
         WHEN k.cape <> '' AND coalesce(p.state->>'cancel_at_period_end', 'false') <> k.cape THEN 'cancel_at_period_end'
         -- the kept fields of a listed object without a status (a
         -- customer): only its state says it changed
         WHEN k.status = '' AND k.state IS NOT NULL AND p.state <> k.state::jsonb THEN 'state'
    END AS kind,
    CASE WHEN p.observed_at IS NULL THEN NULL
         WHEN k.deleted <> p.deleted THEN CASE WHEN p.deleted THEN 'deleted' ELSE 'not deleted' END
         WHEN k.status <> '' AND p.status IS DISTINCT FROM k.status THEN coalesce(p.status, '')
         WHEN k.cape <> '' AND coalesce(p.state->>'cancel_at_period_end', 'false') <> k.cape THEN coalesce(p.state->>'cancel_at_period_end', 'false')
         ELSE 'kept state'
    END AS projection_says,
    CASE WHEN p.observed_at IS NULL THEN coalesce(nullif(k.status, ''), 'exists')
         WHEN k.deleted <> p.deleted THEN CASE WHEN k.deleted THEN 'deleted' ELSE 'not deleted' END
         WHEN k.status <> '' AND p.status IS DISTINCT FROM k.status THEN k.status
         WHEN k.cape <> '' AND coalesce(p.state->>'cancel_at_period_end', 'false') <> k.cape THEN k.cape
         ELSE 'other kept state'
    END AS provider_says,
    -- the stale and the parked steps check those this round: one check per resource
    p.observed_at IS NULL OR (NOT p.needs_reconcile AND NOT ` + staleSQL + `) AS check_now
FROM unnest($7::text[], $8::text[], $9::text[], $10::bool[], $11::text[]) AS k(id, status, cape, deleted, state)
LEFT JOIN projection p
  ON p.provider = $1 AND p.source_account = $2 AND p.environment = $3 AND p.resource_type = $4 AND p.resource_id = k.id`

// enqueueListedSQL checks every listed resource that diverged from its
// projection, whatever its age, and records each divergence once: a
// lasting one updates its open row's last_seen_at, and only a new row
// counts. A listed resource found in sync resolves its open divergences.
// It returns the checks sent and the new divergences by kind.
const enqueueListedSQL = `
WITH l AS (` + divergedSQL + `
), chk AS (
    INSERT INTO outbox (message_key, message)
    SELECT concat_ws('/', $1::text, $2::text, $3::text, $4::text, resource_id),
        jsonb_build_object('kind', 'check', 'provider', $1::text, 'source_account', $2::text,
            'environment', $3::text, 'resource_type', $4::text, 'resource_id', resource_id,
            'enqueued_at', now(), 'reason', 'reconcile')
        -- The listing's own state, when it carries one: the processor
        -- writes it as an observation of $12 (fenced, ordered by $13 like a
        -- fetch) and calls no provider.
        -- The record names it (listed_seq) and never carries it: the state
        -- waits in reconcile_listed (lst) for the processor.
        || CASE WHEN state IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('listed_seq', $13::int8) END
    FROM l WHERE kind IS NOT NULL AND check_now
    RETURNING 1
), lst AS (
    INSERT INTO reconcile_listed (provider, source_account, environment, resource_type, resource_id, seq, listed_at, state, status, deleted)
    SELECT $1, $2, $3, $4, resource_id, $13, $12, state::jsonb, listed_status, listed_deleted
    FROM l WHERE kind IS NOT NULL AND check_now AND state IS NOT NULL
    ON CONFLICT DO NOTHING
), div AS (
    INSERT INTO reconcile_divergence (provider, source_account, environment, resource_type, resource_id, kind, projection_says, provider_says)
    SELECT $1, $2, $3, $4, resource_id, kind, projection_says, provider_says FROM l WHERE kind IS NOT NULL
    ON CONFLICT (provider, source_account, environment, resource_type, resource_id, kind, provider_says) WHERE resolved_at IS NULL
    DO UPDATE SET last_seen_at = now()
    RETURNING kind, xmax = 0 AS inserted
), resolved AS (
    UPDATE reconcile_divergence d SET resolved_at = now()
    FROM l
    WHERE d.provider = $1 AND d.source_account = $2 AND d.environment = $3 AND d.resource_type = $4
      AND d.resource_id = l.resource_id AND d.resolved_at IS NULL AND d.kind <> 'parked'
      AND (l.kind IS NULL OR d.kind <> l.kind OR d.provider_says <> l.provider_says)
)
SELECT (SELECT count(*) FROM chk),
       coalesce((SELECT jsonb_object_agg(kind, n) FROM (SELECT kind, count(*) AS n FROM div WHERE inserted GROUP BY kind) x), '{}')`

// EnqueueListed compares each listed resource with its projection in sc,
// sends a check for each that diverged (unless the stale or parked checks
// send one this round), records the divergences, and resolves those of
// resources found in sync. It returns the checks sent and the new
// divergences by kind.
//
// listed is the fetch start (StartFetch) read just before the listing's
// page was asked for: it orders the observations the checks carry against
// every fetch, as a fetch's own start does.
func EnqueueListed(ctx context.Context, pool *pgxpool.Pool, sc Scope, items []Listed, listed FetchStart) (int64, map[string]int64, error) {
	ids, statuses, capes, deleted := make([]string, len(items)), make([]string, len(items)), make([]string, len(items)), make([]bool, len(items))
	states := make([]*string, len(items))
	for i, it := range items {
		ids[i], statuses[i], deleted[i] = it.ID, it.Status, it.Deleted
		if it.CancelAtPeriodEnd != nil {
			capes[i] = strconv.FormatBool(*it.CancelAtPeriodEnd)
		}
		if it.State != nil {
			st := string(it.State)
			states[i] = &st
		}
	}
	var checked int64
	var raw []byte
	if err := pool.QueryRow(ctx, enqueueListedSQL, sc.Provider, sc.SourceAccount, sc.Environment, sc.ResourceType,
		sc.StaleAfter.Seconds(), sc.Terminal, ids, statuses, capes, deleted, states, listed.At, listed.Seq).Scan(&checked, &raw); err != nil {
		return 0, nil, fmt.Errorf("enqueue checks: %w", err)
	}
	var kinds map[string]int64
	if err := json.Unmarshal(raw, &kinds); err != nil {
		return 0, nil, fmt.Errorf("read divergences: %w", err)
	}
	return checked, kinds, nil
}
