package processor

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/registry"
)

type metrics struct {
	records         prometheus.Counter
	events          *prometheus.CounterVec
	outcomes        *prometheus.CounterVec
	undecodable     prometheus.Counter
	fenced          prometheus.Counter
	fenceTakes      prometheus.Counter
	fetches         prometheus.Counter
	fetchSeconds    prometheus.Histogram
	batchSeconds    prometheus.Histogram
	retriesEnqueued prometheus.Counter
	// failures is labelled by provider and event type only: a per-resource
	// label would make one series per subscription.
	failures         *prometheus.CounterVec
	receiveToApply   *prometheus.HistogramVec
	checkDivergences *prometheus.CounterVec
	versionConflicts *prometheus.CounterVec
	rejoins          *prometheus.CounterVec
	countChanged     prometheus.Gauge
	offsetCommits    *prometheus.CounterVec
}

// failureLabels are the provider and type labels a failure of m, an event
// of eventType (or a check), is counted under. Only configured names
// become labels: the type as the endpoint's allow-list (else the
// provider's known types) names it, else "other"; a provider no adapter
// handles is "other" too. Whoever sends events chooses their types, and
// every distinct label value is a series kept until restart.
func (p *Processor) failureLabels(m message.Message, eventType string) []string {
	prov := m.Provider
	if _, err := registry.Lookup(prov); err != nil {
		prov = provider.OtherEventType
	}
	if eventType != message.KindCheck {
		eventType = provider.TypeLabel(p.endpoints[m.EndpointID], registry.KnownEventTypes(m.Provider), eventType)
	}
	return []string{prov, eventType}
}

// receiveToApplyBuckets reach from a healthy pipeline's tens of milliseconds
// to the hours a parked event may wait for a provider to recover.
var receiveToApplyBuckets = []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 3 * 3600, 12 * 3600}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_processor_records_total",
			Help: "Kafka records processed (written to Postgres; their offsets are committed shortly after)."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_processor_events_total",
			Help: "Inbox events by resulting status (processed, retrying, dead, already_handled, missing)."}, []string{"status"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_projection_outcomes_total",
			Help: "Projection write outcomes (applied, stale, duplicate, conflict, gap, unordered, fetched, fetch_failed, fetch_not_found, recorded)."}, []string{"outcome"}),
		undecodable: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_processor_undecodable_records_total",
			Help: "Records whose value is not a hookyard message."}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_processor_fenced_writes_total",
			Help: "Batches refused because the partition was taken over."}),
		fenceTakes: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_processor_fence_takes_total",
			Help: "Partition fences taken on assignment."}),
		fetches: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_processor_fetches_total",
			Help: "Provider API fetches for hint events."}),
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hookyard_processor_fetch_seconds",
			Help: "Provider API fetch latency.", Buckets: prometheus.DefBuckets}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hookyard_processor_batch_seconds",
			Help: "Time to handle one polled batch of one partition.", Buckets: prometheus.DefBuckets}),
		retriesEnqueued: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_processor_retries_enqueued_total",
			Help: "Parked events re-enqueued when due."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_processor_failures_total",
			Help: "Failed processing attempts (provider fetch errors and 404s, version gaps, malformed or rejected events), by provider and event type (\"check\" for reconciliation checks)."},
			[]string{"provider", "type"}),
		receiveToApply: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hookyard_processor_receive_to_apply_seconds",
			Help:    "Time from an event's receipt (received_at) to the commit of the projection write it caused (applied or fetched), retries included.",
			Buckets: receiveToApplyBuckets}, []string{"provider"}),
		checkDivergences: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_processor_check_divergences_total",
			Help: "Reconciliation checks whose provider state differed from the projection, or found none."}, []string{"provider"}),
		versionConflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_projection_version_conflicts_total",
			Help: "Snapshots with the projection's version but other content: the first one stays and the projection is parked for reconciliation (hookyard parked list)."},
			[]string{"provider"}),
		rejoins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_processor_rejoins_total",
			Help: "Times the processor left and rejoined the group, by reason (fenced: a partition still assigned here was fenced, and comes back under a fresh fence)."},
			[]string{"reason"}),
		countChanged: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookyard_processor_partition_count_changed",
			Help: "1 when the processor stopped because the topic's partition count differs from the fenced one (run `hookyard fence resize`)."}),
		offsetCommits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_processor_offset_commits_total",
			Help: "Offset commit requests to the group, by result (ok, failed). One request carries every partition's progress since the previous one."},
			[]string{"result"}),
	}
	r.MustRegister(m.records, m.events, m.outcomes, m.undecodable, m.fenced, m.fenceTakes, m.fetches,
		m.fetchSeconds, m.batchSeconds, m.retriesEnqueued, m.failures, m.receiveToApply, m.checkDivergences, m.versionConflicts, m.rejoins, m.countChanged, m.offsetCommits)
	return m
}
