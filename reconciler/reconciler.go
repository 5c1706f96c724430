// Package reconciler finds what no webhook told us and sends it down the
// same outbox → Kafka → processor path as a "check" message: resources the
// provider lists that have no projection or whose projection says another
// status than the list, projections not observed for StaleAfter that are not
// terminal (chosen from the database, whatever the list shows), and
// projections parked with needs_reconcile. It never writes a projection
// itself, so the fence and partition order still hold: a listed resource's
// check names the state the listing returned (kept, with the fields a
// projection keeps, in reconcile_listed: the Kafka record carries
// identities only), and the processor writes it (as an observation of the
// listing's time) without calling the provider;
// the other checks it sends are fetched on the background quota.
//
// It counts the divergences it finds itself (a listed resource with no
// projection or another status, a parked projection); what a check then
// finds when the processor fetches the resource is recorded in
// projection_history and shown by `hookyard explain`.
//
// A round is a sequence of independent steps (purge, requeue, parked, and
// per source its listings): a step that fails is logged and counted
// (hookyard_reconciler_step_failures_total{step}) and the others still run,
// so one bad row or one provider outage never stops the recovery work of
// the rest.
//
// Each source (an endpoint) is walked by up to three listings, each with a
// checkpoint in reconcile_checkpoint: its resources (Stripe subscriptions,
// status=all), its events (Stripe GET /v1/events, Chargebee GET
// /api/v2/events: events whose webhook never came are ingested through
// intake under their own identity, as if delivered), and for GitHub the
// hook's deliveries (a failed one is followed in reconcile_redelivery and
// asked for again until it arrives or GitHub's 3 days pass: GitHub never
// redelivers by itself). An account's endpoints share one source, except
// per-hook listings: one source per hook. A walk stopped by a 429, an outage or a restart keeps its cursor
// and resumes there; only a walk that reached its end is recorded complete.
// Every divergence is a row of reconcile_divergence, counted once while it
// lasts.
//
// The reconciler owns reconcile_checkpoint and reconcile_redelivery. The
// statements that pick projections to check (and record their divergences)
// belong to package projection, the lookups of the inbox to package inbox:
// the reconciler calls them, it does not write their SQL.
package reconciler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/retention"
	"github.com/hookyard/hookyard/pkg/topic"
)

// Defaults of Config.
const (
	IntervalDefault   = 5 * time.Minute
	StaleAfterDefault = 24 * time.Hour
	PageSizeDefault   = 100
	StuckAfterDefault = 10 * time.Minute
	MaxStaleDefault   = 10000
	// ParkedRecheckDefault is the default of Config.ParkedRecheck.
	ParkedRecheckDefault = 15 * time.Minute
	// OverlapDefault is the default of Config.Overlap.
	OverlapDefault = 10 * time.Minute
)

// Steps of a round, as hookyard_reconciler_step_failures_total labels them.
const (
	StepPurge   = "purge"
	StepRequeue = "requeue"
	StepParked  = "parked"
	StepList    = "list"
	// StepEvents is a source's events scan.
	StepEvents = "events"
	// StepDeliveries is a source's hook deliveries walk.
	StepDeliveries = "deliveries"
)

// Progress reads how far the processors' consumer group got on each
// partition of the events topic (topic.GroupProgress).
type Progress interface {
	Progress(ctx context.Context) ([]topic.PartitionProgress, error)
}

// terminal is s.Terminal, never nil: the statement takes an array.
func terminal(s provider.Source) []string {
	if s.Terminal == nil {
		return []string{}
	}
	return s.Terminal
}

// Config configures a reconciler.
type Config struct {
	// Sources are listed each round.
	Sources []provider.Source
	// Interval between rounds. Defaults to IntervalDefault.
	Interval time.Duration
	// StaleAfter re-checks projections of a source not observed for this
	// long, unless terminal. Defaults to StaleAfterDefault.
	StaleAfter time.Duration
	// MaxStale caps the stale projections of one source checked per round,
	// oldest first, so a provider outage (checks fail, projections stay
	// stale) does not flood the topic. Defaults to MaxStaleDefault.
	MaxStale int
	// PageSize is the provider list page size. Defaults to PageSizeDefault.
	PageSize int
	// StuckAfter: an event pending this long whose Kafka record the
	// processors' group has read past is lost, and re-published. Defaults
	// to StuckAfterDefault.
	StuckAfter time.Duration
	// Progress tells lost events from slow ones: an event is re-published
	// only once its message left the outbox and the group's committed offset
	// on its partition passed the high watermark read after that. Defaults
	// to none: no event is re-published (without the group's progress, lost
	// and slow cannot be told apart, and publishing slow events again adds
	// work exactly when the system is behind).
	Progress Progress
	// FetchProviders are the providers whose checks fetch the resource (the
	// processor has an API client for them). A parked projection is checked
	// once per parking; one of these providers is checked again every
	// ParkedRecheck while it stays parked (a fetch may fail for a while).
	// Others stay parked, listed by `hookyard parked list`, until a newer
	// version or an operator resolves them. Defaults to none.
	FetchProviders []string
	// ParkedRecheck is how often a parked projection of a FetchProviders
	// provider is checked again. Defaults to ParkedRecheckDefault.
	ParkedRecheck time.Duration
	// StateFields are the fields of a listed state kept for its check
	// beyond projection.DecisionFields: the processor's StateFields, so
	// reconcile_listed holds no more than the projection will. Defaults to
	// none.
	StateFields []string
	// Overlap is how far before the last complete walk's newest event an
	// events or deliveries walk starts again, so an event that became
	// visible late is still seen. Defaults to OverlapDefault.
	Overlap time.Duration
	// Backfill is how far back a source's first events or deliveries walk
	// (no checkpoint yet) reaches: a new installation, or a new endpoint,
	// ingests what the provider still lists from that far back (Stripe: 30
	// days of events; GitHub: 3 days of deliveries). Zero (the default)
	// starts at Overlap before now.
	Backfill time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
	// Retention: each round runs a retention pass (retention.Run): body
	// partitions created ahead and dropped behind the horizon, identities
	// forgotten past identity_age, legacy payloads purged. Nil skips it.
	Retention *retention.Policy
	// AuditRetention: each round deletes ops_audit records older than
	// this (audit.Purge). Zero keeps them.
	AuditRetention time.Duration
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
}

// Reconciler enqueues checks.
type Reconciler struct {
	pool         *pgxpool.Pool
	log          *slog.Logger
	cfg          Config
	enqueued     *prometheus.CounterVec
	divergences  *prometheus.CounterVec
	purged       prometheus.Counter
	stepFails    *prometheus.CounterVec
	waiting      prometheus.Gauge
	ingested     *prometheus.CounterVec
	redeliveries *prometheus.CounterVec
	givenUp      *prometheus.CounterVec

	// marks remembers, for each published pending event of the last round,
	// its partition's high watermark when it was first seen published: its
	// record lies below it, so once the group's committed offset passes it
	// while the event is still pending, the record is lost.
	mu    sync.Mutex
	marks map[inbox.Key]mark
}

type mark struct {
	at  time.Time
	end int64
}

// New builds a reconciler.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) *Reconciler {
	cfg.Interval = cmp.Or(cfg.Interval, IntervalDefault)
	cfg.StaleAfter = cmp.Or(cfg.StaleAfter, StaleAfterDefault)
	cfg.PageSize = cmp.Or(cfg.PageSize, PageSizeDefault)
	cfg.StuckAfter = cmp.Or(cfg.StuckAfter, StuckAfterDefault)
	cfg.MaxStale = cmp.Or(cfg.MaxStale, MaxStaleDefault)
	cfg.ParkedRecheck = cmp.Or(cfg.ParkedRecheck, ParkedRecheckDefault)
	cfg.Overlap = cmp.Or(cfg.Overlap, OverlapDefault)
	cfg.StateFields = projection.KeptFields(cfg.StateFields)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Registerer == nil {
		cfg.Registerer = prometheus.NewRegistry()
	}
	r := &Reconciler{pool: pool, log: log.With(slog.String("service", "reconciler")), cfg: cfg,
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_reconciler_checks_enqueued_total",
			Help: "Messages enqueued, by reason (listed: missing projection or another status than the provider lists; stale: not observed for stale_after and not terminal; parked; stuck)."}, []string{"reason"}),
		divergences: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_reconciler_divergences_total",
			Help: "Divergences a reconcile round found, by provider and kind (missing: the provider lists a resource that has no projection; status, cancel_at_period_end, deleted: the provider lists another one than the projection's; state: an object without a status, a customer, lists other kept fields; parked: a projection was parked — version gap, conflict, unordered). Each is counted once while it lasts (a row of reconcile_divergence) and sent as a check."},
			[]string{"provider", "kind"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_inbox_payloads_purged_total",
			Help: "Finished events whose payload the retention purge dropped (identity and decision stay)."}),
		stepFails: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_reconciler_step_failures_total",
			Help: "Reconcile round steps that failed (purge, requeue, parked, list); the round's other steps still ran."}, []string{"step"}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookyard_reconciler_published_pending_events",
			Help: "Pending events past the stuck age whose message is in Kafka and not yet read past by the processors' group: slow, not (yet) lost, as of the last round."}),
		ingested: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_reconciler_events_ingested_total",
			Help: "Events found by an events scan that no delivery had brought, ingested as if delivered, by provider."}, []string{"provider"}),
		redeliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_reconciler_redeliveries_total",
			Help: "Redeliveries asked of the provider for deliveries that never got a 2xx (GitHub), by provider."}, []string{"provider"}),
		givenUp: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_reconciler_redeliveries_given_up_total",
			Help: "Failed deliveries whose event never arrived and that the provider no longer redelivers (GitHub: refused, or past its 3-day limit), by provider; each is listed by `hookyard reconcile`."}, []string{"provider"}),
		marks: map[inbox.Key]mark{}}
	cfg.Registerer.MustRegister(r.enqueued, r.divergences, r.purged, r.stepFails, r.waiting, r.ingested, r.redeliveries, r.givenUp)
	return r
}

// Run reconciles every Interval until ctx ends.
func (r *Reconciler) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := r.Round(ctx, Filter{}); err != nil && ctx.Err() == nil {
			// Each failed step was logged with its name; this is the summary.
			r.log.DebugContext(ctx, "reconcile round had failed steps", slog.String("error", err.Error()))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce runs one round over every source and returns the checks and
// events it enqueued. Each step runs whatever became of the others; the
// error joins the steps that failed.
func (r *Reconciler) RunOnce(ctx context.Context) (int64, error) {
	rep, err := r.Round(ctx, Filter{})
	return rep.Enqueued, err
}

// Round runs one round over the sources f selects and says what it found.
// A filtered round (an operator's `hookyard reconcile -provider P`) leaves
// out the steps that are not about a source (purge, lost-event requeue);
// the parked step checks the selected providers' parked projections.
func (r *Reconciler) Round(ctx context.Context, f Filter) (Report, error) {
	rep := Report{StartedAt: r.now()}
	var errs []error
	step := func(name string, run func(context.Context) (int64, error)) {
		n, err := run(ctx)
		rep.Enqueued += n
		if err != nil {
			r.stepFails.WithLabelValues(name).Inc()
			if ctx.Err() == nil {
				r.log.WarnContext(ctx, "reconcile step failed", slog.String("step", name), slog.String("error", err.Error()))
			}
			err = fmt.Errorf("reconcile %s: %w", name, err)
			rep.Errors = append(rep.Errors, err.Error())
			errs = append(errs, err)
		}
	}
	if f.empty() {
		if r.cfg.Retention != nil {
			step(StepPurge, func(ctx context.Context) (int64, error) {
				rep, err := retention.Run(ctx, r.pool, r.log, *r.cfg.Retention, time.Now())
				r.purged.Add(float64(rep.LegacyPurged))
				return 0, err
			})
		}
		if r.cfg.AuditRetention > 0 {
			step(StepPurge, func(ctx context.Context) (int64, error) {
				_, err := audit.Purge(ctx, r.pool, time.Now().Add(-r.cfg.AuditRetention))
				return 0, err
			})
		}
		step(StepRequeue, func(ctx context.Context) (int64, error) {
			n, err := r.requeueLost(ctx)
			rep.Requeued += n
			return n, err
		})
	}
	step(StepParked, func(ctx context.Context) (int64, error) {
		n, err := r.enqueueParked(ctx, f)
		rep.Parked += n
		return n, err
	})
	for _, s := range r.cfg.Sources {
		if !f.selects(s) {
			continue
		}
		sr := &SourceReport{Source: s.Name(), Provider: s.Provider, SourceAccount: s.SourceAccount, Environment: s.Environment}
		for _, ls := range s.Listings() {
			step(StepList, func(ctx context.Context) (int64, error) {
				before := sr.Checks
				err := r.reconcileSource(ctx, ls, sr)
				if err != nil {
					sr.Errors = append(sr.Errors, err.Error())
				}
				return sr.Checks - before, err
			})
		}
		if s.Events != nil {
			step(StepEvents, func(ctx context.Context) (int64, error) {
				before := sr.EventsIngested
				err := r.scanEvents(ctx, s, sr)
				if err != nil {
					sr.Errors = append(sr.Errors, err.Error())
				}
				return sr.EventsIngested - before, err
			})
		}
		if s.Hooks != nil {
			step(StepDeliveries, func(ctx context.Context) (int64, error) {
				err := r.redeliverLost(ctx, s, sr)
				if err != nil {
					sr.Errors = append(sr.Errors, err.Error())
				}
				return 0, err
			})
		}
		rep.Sources = append(rep.Sources, *sr)
	}
	if rep.Enqueued > 0 {
		r.log.InfoContext(ctx, "reconcile round", slog.Int64("enqueued", rep.Enqueued))
	}
	return rep, errors.Join(errs...)
}

func (r *Reconciler) now() time.Time { return r.cfg.Now() }

// reconcileSource checks the source's stale projections, then walks its
// listing from its checkpoint.
func (r *Reconciler) reconcileSource(ctx context.Context, s provider.Source, rep *SourceReport) error {
	stale, err := projection.EnqueueStale(ctx, r.pool, r.scope(s, terminal(s)), r.cfg.MaxStale)
	if err != nil {
		return err
	}
	rep.Checks += stale
	r.enqueued.WithLabelValues("stale").Add(float64(stale))
	if s.Lister == nil {
		return nil
	}
	return r.walkListing(ctx, s, rep)
}

func (r *Reconciler) enqueueParked(ctx context.Context, f Filter) (int64, error) {
	sent, err := projection.EnqueueParked(ctx, r.pool, projection.ParkedChecks{FetchProviders: r.cfg.FetchProviders,
		RecheckAfter: r.cfg.ParkedRecheck, Provider: f.Provider, SourceAccount: f.SourceAccount, Environment: f.Environment})
	var total int64
	for _, p := range sent {
		total += p.Checks
		r.divergences.WithLabelValues(p.Provider, "parked").Add(float64(p.First))
	}
	if err != nil {
		return total, err
	}
	r.enqueued.WithLabelValues("parked").Add(float64(total))
	if err := projection.ResolveUnparked(ctx, r.pool); err != nil {
		return total, err
	}
	return total, nil
}

// scope is the projections of s's resource type, stale after StaleAfter
// unless their status is one of terminal.
func (r *Reconciler) scope(s provider.Source, terminal []string) projection.Scope {
	return projection.Scope{Provider: s.Provider, SourceAccount: s.SourceAccount, Environment: s.Environment,
		ResourceType: s.ResourceType, StaleAfter: r.cfg.StaleAfter, Terminal: terminal}
}

// requeueLost re-publishes pending events whose Kafka record is lost, and
// only those. An event is a candidate once its message left the outbox
// (inbox.PublishedPending): its record was acknowledged by then, so it lies
// below the high watermark read afterwards. It is lost when the group's
// committed offset on its partition reaches that high watermark while the
// event is still pending — the group read past it without handling it (an
// embedded broker that started empty, retention, an unclean leader
// election). That is decided at once when the group has caught up with the
// partition, else in a later round against the high watermark remembered
// when the event was first seen. A group that is merely behind never
// reaches it, so slow events are not published twice.
func (r *Reconciler) requeueLost(ctx context.Context) (int64, error) {
	if r.cfg.Progress == nil {
		return 0, nil
	}
	pub, err := inbox.PublishedPending(ctx, r.pool, time.Now().Add(-r.cfg.StuckAfter), 1000)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(pub) == 0 {
		clear(r.marks)
		r.waiting.Set(0)
		return 0, nil
	}
	prog, err := r.cfg.Progress.Progress(ctx)
	if err != nil {
		return 0, err
	}
	if len(prog) == 0 {
		return 0, errors.New("read consumer group progress: no partitions")
	}
	marks := make(map[inbox.Key]mark, len(pub))
	var lost []inbox.Published
	for _, p := range pub {
		pp := prog[topic.PartitionOf(p.MessageKey, len(prog))]
		if !pp.Known {
			if m, ok := r.marks[p.Key]; ok && m.at.Equal(p.At) {
				marks[p.Key] = m
			}
			continue
		}
		m, ok := r.marks[p.Key]
		if !ok || !m.at.Equal(p.At) {
			m = mark{at: p.At, end: pp.End}
		}
		if pp.Consumed >= m.end || pp.Consumed >= pp.End {
			lost = append(lost, p)
			continue
		}
		marks[p.Key] = m
	}
	r.marks = marks
	r.waiting.Set(float64(len(marks)))
	n, err := inbox.RequeueLost(ctx, r.pool, lost)
	r.enqueued.WithLabelValues("stuck").Add(float64(n))
	if n > 0 {
		r.log.InfoContext(ctx, "re-published lost events", slog.Int64("count", n),
			slog.Int("waiting", len(marks)))
	}
	return n, err
}
