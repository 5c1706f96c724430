// Package reconciler finds what no webhook told us and sends it down the
// same outbox → Kafka → processor path as a "check" message: resources the
// provider lists that have no projection (or one older than StaleAfter), and
// projections parked with needs_reconcile. It never writes a projection
// itself, so the fence and partition order still hold.
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
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
}

// Reconciler enqueues checks.
type Reconciler struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	cfg      Config
	enqueued *prometheus.CounterVec
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
			Help: "Messages enqueued, by reason (listed: missing or stale projection, parked, stuck)."}, []string{"reason"})}
	cfg.Registerer.MustRegister(r.enqueued)
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

const enqueueListedSQL = `
INSERT INTO outbox (message_key, message)
SELECT ` + checkColumns + `
FROM (SELECT $1::text AS provider, $2::text AS source_account, $3::text AS environment, $4::text AS resource_type, id AS resource_id
      FROM unnest($5::text[]) AS id) l
WHERE NOT EXISTS (
    SELECT 1 FROM subscription_projection p
    WHERE p.provider = l.provider AND p.source_account = l.source_account AND p.environment = l.environment
      AND p.resource_type = l.resource_type AND p.resource_id = l.resource_id AND p.observed_at > now() - make_interval(secs => $6::float8))`

const enqueueParkedSQL = `
INSERT INTO outbox (message_key, message)
SELECT ` + checkColumns + `
FROM subscription_projection WHERE needs_reconcile`

// RunOnce runs one round and returns the checks it enqueued.
func (r *Reconciler) RunOnce(ctx context.Context) (int64, error) {
	var total int64
	stuck, err := inbox.RequeueStuck(ctx, r.pool, time.Now().Add(-r.cfg.StuckAfter), 1000)
	if err != nil {
		return total, err
	}
	total += stuck
	r.enqueued.WithLabelValues("stuck").Add(float64(stuck))
	tag, err := r.pool.Exec(ctx, enqueueParkedSQL)
	if err != nil {
		return total, fmt.Errorf("enqueue parked resources: %w", err)
	}
	total += tag.RowsAffected()
	r.enqueued.WithLabelValues("parked").Add(float64(tag.RowsAffected()))
	for _, s := range r.cfg.Sources {
		after := ""
		for {
			ids, more, err := s.Lister.List(ctx, s.APIAccount, s.ResourceType, after, r.cfg.PageSize)
			if err != nil {
				return total, fmt.Errorf("list %s %s for %s: %w", s.Provider, s.ResourceType, s.SourceAccount, err)
			}
			if len(ids) > 0 {
				tag, err := r.pool.Exec(ctx, enqueueListedSQL, s.Provider, s.SourceAccount, s.Environment, s.ResourceType, ids,
					r.cfg.StaleAfter.Seconds())
				if err != nil {
					return total, fmt.Errorf("enqueue checks: %w", err)
				}
				total += tag.RowsAffected()
				r.enqueued.WithLabelValues("listed").Add(float64(tag.RowsAffected()))
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
