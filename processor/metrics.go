package processor

import "github.com/prometheus/client_golang/prometheus"

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
}

func newMetrics(r prometheus.Registerer) *metrics {
	m := &metrics{
		records: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_processor_records_total",
			Help: "Kafka records processed and committed."}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_processor_events_total",
			Help: "Inbox events by resulting status (processed, retrying, dead, already_handled, missing)."}, []string{"status"}),
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_projection_outcomes_total",
			Help: "Projection write outcomes (applied, stale, duplicate, conflict, gap, fetched, fetch_failed, recorded)."}, []string{"outcome"}),
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
	}
	r.MustRegister(m.records, m.events, m.outcomes, m.undecodable, m.fenced, m.fenceTakes, m.fetches,
		m.fetchSeconds, m.batchSeconds, m.retriesEnqueued)
	return m
}
