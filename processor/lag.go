package processor

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
)

// lagTimeout bounds the broker requests one scrape makes.
const lagTimeout = 2 * time.Second

var lagDesc = prometheus.NewDesc("hookyard_processor_consumer_lag",
	"Records of a partition this processor owns that its group has not committed yet: the log end offset minus the group's committed offset, read from the brokers on scrape.",
	[]string{"topic", "partition"}, nil)

// lagCollector reports consumer lag for the partitions this processor owns,
// so that processors side by side report disjoint series and sum() is the
// group's lag. It asks the brokers on each scrape rather than trusting the
// last fetch: a worker stuck on one batch stops fetching, and its lag must
// still grow.
type lagCollector struct{ p *Processor }

func (c lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- lagDesc }

func (c lagCollector) Collect(ch chan<- prometheus.Metric) {
	p := c.p
	p.mu.Lock()
	cl := p.cl
	owned := make([]int32, 0, len(p.owned))
	for part := range p.owned {
		owned = append(owned, part)
	}
	p.mu.Unlock()
	if cl == nil || len(owned) == 0 {
		return
	}
	// Collect gets no context from the registry; the timeout bounds it.
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	defer cancel()
	adm := kadm.NewClient(cl) // shares cl; closing it would close cl
	// A partition's own error drops only that partition's series.
	ends, err := adm.ListEndOffsets(ctx, p.cfg.Topic)
	if err != nil {
		p.log.Debug("consumer lag: list end offsets", slog.String("error", err.Error()))
		return
	}
	starts, err := adm.ListStartOffsets(ctx, p.cfg.Topic)
	if err != nil {
		p.log.Debug("consumer lag: list start offsets", slog.String("error", err.Error()))
		return
	}
	committed, err := adm.FetchOffsets(ctx, p.cfg.Group)
	if err != nil {
		p.log.Debug("consumer lag: fetch committed offsets", slog.String("error", err.Error()))
		return
	}
	for _, part := range owned {
		end, ok := ends.Lookup(p.cfg.Topic, part)
		if !ok || end.Err != nil {
			continue
		}
		start, ok := starts.Lookup(p.cfg.Topic, part)
		if !ok || start.Err != nil {
			continue
		}
		// Nothing committed yet: the group starts at the log's start. A
		// commit below the log start (retention deleted records the group
		// never read) counts from the log start too: those are gone.
		from := start.Offset
		if o, ok := committed.Lookup(p.cfg.Topic, part); ok && o.Err == nil && o.At > from {
			from = o.At
		}
		ch <- prometheus.MustNewConstMetric(lagDesc, prometheus.GaugeValue, float64(max(end.Offset-from, 0)),
			p.cfg.Topic, strconv.Itoa(int(part)))
	}
}
