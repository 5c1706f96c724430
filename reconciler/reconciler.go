// Package reconciler finds what no webhook told us and sends it down the
// same outbox → Kafka → processor path as a "check" message: resources the
// provider lists that have no projection (or one older than StaleAfter), and
// projections parked with needs_reconcile. It never writes a projection
// itself, so the fence and partition order still hold.
//
// It counts the divergences it finds itself (a listed resource with no
// projection, a parked projection); what a check then finds when the
// processor fetches the resource is recorded in projection_history and shown
// by `hookyard explain`.
package reconciler

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookyard/hookyard/pkg/inbox"
)

// Defaults of Config.
const (
	IntervalDefault   = 5 * time.Minute
	StaleAfterDefault = 24 * time.Hour
	PageSizeDefault   = 100
	StuckAfterDefault = 10 * time.Minute
)

// Lister pages through a provider's resources.
type Lister interface {
	List(ctx context.Context, account, resourceType, startingAfter string, limit int) (ids []string, hasMore bool, err error)
}

// Source is one provider account whose resources are listed.
type Source struct {
	Provider      string
	SourceAccount string
	Environment   string
	ResourceType  string
	// APIAccount is sent to the provider API as the account to act for
	// (Stripe-Account), or "" for the API key's own account.
	APIAccount string
	Lister     Lister
}

// Config configures a reconciler.
type Config struct {
	// Sources are listed each round.
	Sources []Source
	// Interval between rounds. Defaults to IntervalDefault.
	Interval time.Duration
	// StaleAfter re-checks projections not observed for this long. Defaults
	// to StaleAfterDefault.
	StaleAfter time.Duration
	// PageSize is the provider list page size. Defaults to PageSizeDefault.
	PageSize int
	// StuckAfter re-publishes events still pending after this long (their
	// Kafka message was lost). Defaults to StuckAfterDefault.
	StuckAfter time.Duration
	// PayloadRetention: each round drops the payloads of finished events
	// received longer ago than this (inbox.PurgePayloads). Zero keeps them.
	PayloadRetention time.Duration
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
}

// Reconciler enqueues checks.
type Reconciler struct {
	pool        *pgxpool.Pool
	log         *slog.Logger
	cfg         Config
	enqueued    *prometheus.CounterVec
	divergences *prometheus.CounterVec
	purged      prometheus.Counter
}

// New builds a reconciler.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) *Reconciler {
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.StaleAfter = cmp.Or(cfg.StaleAfter, StaleAfterDefault)
	cfg.PageSize = cmp.Or(cfg.PageSize, PageSizeDefault)
	cfg.StuckAfter = cmp.Or(cfg.StuckAfter, StuckAfterDefault)
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	r := &Reconciler{pool: pool, log: log.With(slog.String("service", "reconciler")), cfg: cfg,
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_reconciler_checks_enqueued_total",
			Help: "Messages enqueued, by reason (listed: missing or stale projection, parked, stuck)."}, []string{"reason"}),
		divergences: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_reconciler_divergences_total",
			Help: "Divergences a reconcile round found, by provider and kind (missing: the provider lists a resource that has no projection; parked: a projection waits for a missing version). Each one is sent as a check."},
			[]string{"provider", "kind"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_inbox_payloads_purged_total",
			Help: "Finished events whose payload the retention purge dropped (identity and decision stay)."})}
	cfg.Registerer.MustRegister(r.enqueued, r.divergences, r.purged)
	return r
}

// Run reconciles every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "reconcile round failed", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

const checkColumns = `concat_ws('/', provider, source_account, environment, resource_type, resource_id),
    jsonb_build_object('kind', 'check', 'provider', provider, 'source_account', source_account,
        'environment', environment, 'resource_type', resource_type, 'resource_id', resource_id,
        'enqueued_at', now(), 'reason', 'reconcile')`

// enqueueListedSQL checks each listed resource whose projection is missing
// or older than the stale age, and says how many it checked and how many of
// them had no projection at all.
const enqueueListedSQL = `
WITH l AS (
    SELECT $1::text AS provider, $2::text AS source_account, $3::text AS environment, $4::text AS resource_type,
           id AS resource_id, p.observed_at IS NULL AS missing
    FROM unnest($5::text[]) AS id
    LEFT JOIN subscription_projection p
      ON p.provider = $1 AND p.source_account = $2 AND p.environment = $3 AND p.resource_type = $4 AND p.resource_id = id
    WHERE p.observed_at IS NULL OR p.observed_at <= now() - make_interval(secs => $6::float8)
), ins AS (
    INSERT INTO outbox (message_key, message)
    SELECT ` + checkColumns + ` FROM l
)
SELECT count(*), count(*) FILTER (WHERE missing) FROM l`

const enqueueParkedSQL = `
WITH ins AS (
    INSERT INTO outbox (message_key, message)
    SELECT ` + checkColumns + `
    FROM subscription_projection WHERE needs_reconcile
    RETURNING message::jsonb->>'provider' AS provider
)
SELECT provider, count(*) FROM ins GROUP BY provider`

// RunOnce runs one round and returns the checks it enqueued.
func (r *Reconciler) RunOnce(ctx context.Context) (int64, error) {
	var total int64
	if r.cfg.PayloadRetention > 0 {
		n, err := inbox.PurgePayloads(ctx, r.pool, time.Now().Add(-r.cfg.PayloadRetention), 1000)
		r.purged.Add(float64(n))
		if err != nil {
			return total, err
		}
	}
	stuck, err := inbox.RequeueStuck(ctx, r.pool, time.Now().Add(-r.cfg.StuckAfter), 1000)
	if err != nil {
		return total, err
	}
	total += stuck
	r.enqueued.WithLabelValues("stuck").Add(float64(stuck))
	parked, err := r.enqueueParked(ctx)
	if err != nil {
		return total, err
	}
	total += parked
	for _, s := range r.cfg.Sources {
		after := ""
		for {
			ids, more, err := s.Lister.List(ctx, s.APIAccount, s.ResourceType, after, r.cfg.PageSize)
			if err != nil {
				return total, fmt.Errorf("list %s %s for %s: %w", s.Provider, s.ResourceType, s.SourceAccount, err)
			}
			if len(ids) > 0 {
				var checked, missing int64
				if err := r.pool.QueryRow(ctx, enqueueListedSQL, s.Provider, s.SourceAccount, s.Environment, s.ResourceType, ids,
					r.cfg.StaleAfter.Seconds()).Scan(&checked, &missing); err != nil {
					return total, fmt.Errorf("enqueue checks: %w", err)
				}
				total += checked
				r.enqueued.WithLabelValues("listed").Add(float64(checked))
				r.divergences.WithLabelValues(s.Provider, "missing").Add(float64(missing))
				after = ids[len(ids)-1]
			}
			if !more || len(ids) == 0 {
				break
			}
		}
	}
	if total > 0 {
		r.log.InfoContext(ctx, "reconcile round", slog.Int64("checks", total))
	}
	return total, nil
}

func (r *Reconciler) enqueueParked(ctx context.Context) (int64, error) {
	rows, err := r.pool.Query(ctx, enqueueParkedSQL)
	if err != nil {
		return 0, fmt.Errorf("enqueue parked resources: %w", err)
	}
	var total int64
	for rows.Next() {
		var provider string
		var n int64
		if err := rows.Scan(&provider, &n); err != nil {
			rows.Close()
			return total, fmt.Errorf("enqueue parked resources: %w", err)
		}
		total += n
		r.divergences.WithLabelValues(provider, "parked").Add(float64(n))
	}
	if err := rows.Err(); err != nil {
		return total, fmt.Errorf("enqueue parked resources: %w", err)
	}
	r.enqueued.WithLabelValues("parked").Add(float64(total))
	return total, nil
}
