package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Divergence kinds, as reconcile_divergence and
// hookyard_reconciler_divergences_total name them.
const (
	// KindMissing: the provider lists a resource that has no projection.
	KindMissing = "missing"
	// KindStatus: the provider lists another status than the projection's.
	KindStatus = "status"
	// KindCancelAtPeriodEnd: the provider says the resource ends (or no
	// longer ends) at its period's end, the projection says otherwise.
	KindCancelAtPeriodEnd = "cancel_at_period_end"
	// KindDeleted: one side says deleted, the other does not.
	KindDeleted = "deleted"
	// KindParked: a projection was parked (version gap, conflict, unordered).
	KindParked = "parked"
)

// divergedSQL compares each listed resource with its projection and names
// the first way they differ (NULL when in sync). Order matters: a missing
// projection says nothing else, a deletion makes status moot.
const divergedSQL = `
SELECT k.id AS resource_id, p.observed_at IS NULL AS missing,
    CASE WHEN p.observed_at IS NULL THEN 'missing'
         WHEN k.deleted <> p.deleted THEN 'deleted'
         WHEN p.deleted THEN NULL
         WHEN k.status <> '' AND p.status IS DISTINCT FROM k.status THEN 'status'
         WHEN k.cape <> '' AND coalesce(p.state->>'cancel_at_period_end', 'false') <> k.cape THEN 'cancel_at_period_end'
    END AS kind,
    CASE WHEN p.observed_at IS NULL THEN NULL
         WHEN k.deleted <> p.deleted THEN CASE WHEN p.deleted THEN 'deleted' ELSE 'not deleted' END
         WHEN k.status <> '' AND p.status IS DISTINCT FROM k.status THEN coalesce(p.status, '')
         ELSE coalesce(p.state->>'cancel_at_period_end', 'false')
    END AS projection_says,
    CASE WHEN p.observed_at IS NULL THEN coalesce(nullif(k.status, ''), 'exists')
         WHEN k.deleted <> p.deleted THEN CASE WHEN k.deleted THEN 'deleted' ELSE 'not deleted' END
         WHEN k.status <> '' AND p.status IS DISTINCT FROM k.status THEN k.status
         ELSE k.cape
    END AS provider_says,
    -- the stale and the parked steps check those this round: one check per resource
    p.observed_at IS NULL OR (NOT p.needs_reconcile AND NOT ` + staleSQL + `) AS check_now
FROM unnest($7::text[], $8::text[], $9::text[], $10::bool[]) AS k(id, status, cape, deleted)
LEFT JOIN subscription_projection p
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
    FROM l WHERE kind IS NOT NULL AND check_now
    RETURNING 1
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

// walkListing pages through a source's resources from its checkpoint
// (a walk interrupted by an error resumes where it stopped), checking
// what diverged.
func (r *Reconciler) walkListing(ctx context.Context, s provider.Source, rep *SourceReport) error {
	// The source's provider calls share its credentials' quota with the
	// processor's fetches, inside the smaller background share.
	ctx = provider.Background(ctx)
	listing := listingOf(s.ResourceType)
	lr := rep.listing(listing)
	cp, err := LoadCheckpoint(ctx, r.pool, s.Name(), listing)
	if err != nil {
		return err
	}
	after := cp.Cursor
	lr.ResumedAt = after
	terminal := terminal(s)
	for {
		items, more, err := s.Lister.ListObjects(ctx, s.APIAccount, s.ResourceType, after, r.cfg.PageSize)
		if err != nil {
			err = fmt.Errorf("list %s %s for %s/%s: %w", s.Provider, s.ResourceType, s.SourceAccount, s.Environment, err)
			return r.interrupted(ctx, s, lr, after, err)
		}
		lr.Pages++
		if len(items) > 0 {
			if err := r.checkListed(ctx, s, terminal, items, rep); err != nil {
				return r.interrupted(ctx, s, lr, after, err)
			}
		}
		if !more || len(items) == 0 {
			lr.Complete = true
			return saveComplete(ctx, r.pool, s.Name(), listing, nil)
		}
		after = items[len(items)-1].ID
		if err := saveProgress(ctx, r.pool, s.Name(), listing, after, nil); err != nil {
			return err
		}
	}
}

// interrupted records where a walk stopped and why, and returns the error.
func (r *Reconciler) interrupted(ctx context.Context, s provider.Source, lr *ListingReport, cursor string, err error) error {
	lr.Error = err.Error()
	if serr := saveProgress(ctx, r.pool, s.Name(), lr.Listing, cursor, err); serr != nil {
		return fmt.Errorf("%w; %w", err, serr)
	}
	return err
}

func (r *Reconciler) checkListed(ctx context.Context, s provider.Source, terminal []string, items []provider.Listed, rep *SourceReport) error {
	ids, statuses, capes, deleted := make([]string, len(items)), make([]string, len(items)), make([]string, len(items)), make([]bool, len(items))
	for i, it := range items {
		ids[i], statuses[i], deleted[i] = it.ID, it.Status, it.Deleted
		if it.CancelAtPeriodEnd != nil {
			capes[i] = strconv.FormatBool(*it.CancelAtPeriodEnd)
		}
	}
	var checked int64
	var raw []byte
	if err := r.pool.QueryRow(ctx, enqueueListedSQL, s.Provider, s.SourceAccount, s.Environment, s.ResourceType,
		r.cfg.StaleAfter.Seconds(), terminal, ids, statuses, capes, deleted).Scan(&checked, &raw); err != nil {
		return fmt.Errorf("enqueue checks: %w", err)
	}
	var kinds map[string]int64
	if err := json.Unmarshal(raw, &kinds); err != nil {
		return fmt.Errorf("read divergences: %w", err)
	}
	rep.Checks += checked
	r.enqueued.WithLabelValues("listed").Add(float64(checked))
	for kind, n := range kinds {
		rep.Divergences += n
		r.divergences.WithLabelValues(s.Provider, kind).Add(float64(n))
	}
	return nil
}
