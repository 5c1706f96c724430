// Package deploy holds no code: its tests check the deployment files beside
// them (the Helm chart, the alerting rules, the Grafana dashboard) against the
// code they deploy and observe.
package deploy

import (
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/effects"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/ops/metrics"
	"github.com/hookyard/hookyard/processor"
	"github.com/hookyard/hookyard/receiver"
	"github.com/hookyard/hookyard/reconciler"
)

// recorder is a Registerer that keeps what was registered, so the metric
// names come from the collectors' descriptions: a collector that reports
// only when it can read Postgres or Kafka (backlog, lag) is described all
// the same.
type recorder struct {
	reg        *prometheus.Registry
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

func (r *recorder) Unregister(c prometheus.Collector) bool { return r.reg.Unregister(c) }

var (
	registeredOnce sync.Once
	registered     map[string][]string
	registeredErr  error
	descName       = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels     = regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
)

// registeredMetrics returns every metric name hookyard's services register
// (internal/cli wires the same constructors into one registry per process),
// with its label names. The services are built, not run: the pool is lazy and
// the Kafka clients are created by Run.
func registeredMetrics(t *testing.T) map[string][]string {
	t.Helper()
	registeredOnce.Do(func() { registered, registeredErr = buildRegistered(t) })
	require.NoError(t, registeredErr)
	return registered
}

func buildRegistered(t *testing.T) (map[string][]string, error) {
	raw, err := os.ReadFile("../hookyard.example.yaml")
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(raw, func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.New(t.Context(), "postgres://hookyard@127.0.0.1:1/never-dialled")
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	log := slog.New(slog.DiscardHandler)
	rec := &recorder{reg: prometheus.NewRegistry()}
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	brokers := []string{"127.0.0.1:1"}

	r, err := receiver.New(pool, log, receiver.Config{Endpoints: cfg.Endpoints, Registerer: rec, Gatherer: rec.reg})
	if err != nil {
		return nil, err
	}
	r.Stop()
	if _, err := outboxrelay.New(pool, log, outboxrelay.Config{Brokers: brokers, Topic: cfg.Kafka.Topic, Registerer: rec}); err != nil {
		return nil, err
	}
	if _, err := processor.New(pool, log, processor.Config{Brokers: brokers, Topic: cfg.Kafka.Topic, Group: cfg.Kafka.Group,
		Endpoints: cfg.Endpoints, Registerer: rec}); err != nil {
		return nil, err
	}
	reconciler.New(pool, log, reconciler.Config{Registerer: rec})
	if _, err := effects.New(pool, log, effects.Config{Registerer: rec}); err != nil {
		return nil, err
	}
	rec.MustRegister(metrics.New(pool, log, metrics.Config{}))

	out := map[string][]string{}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			m := descName.FindStringSubmatch(s)
			if m == nil {
				continue
			}
			var names []string
			if l := descLabels.FindStringSubmatch(s); l != nil && l[1] != "" {
				names = strings.Split(l[1], ",")
			}
			out[m[1]] = names
		}
	}
	return out, nil
}

// histogramSeries maps the series a histogram exposes to its name.
var histogramSeries = regexp.MustCompile(`^(.+)_(bucket|sum|count)$`)

// checkQuery parses a PromQL query and requires every metric it selects to
// be registered by hookyard, and every label it matches on to be one of that
// metric's labels: a renamed metric or label fails here, not as an alert that
// silently never fires or a panel that stays empty.
func checkQuery(t *testing.T, where, query string) []string {
	t.Helper()
	metrics := registeredMetrics(t)
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	require.NoError(t, err, "%s: %s", where, query)
	var used []string
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		require.NotEmpty(t, name, "%s: every selector names its metric: %s", where, query)
		lbls, ok := metrics[name]
		extra := []string{}
		if !ok {
			if m := histogramSeries.FindStringSubmatch(name); m != nil {
				lbls, ok = metrics[m[1]]
				if m[2] == "bucket" {
					extra = append(extra, "le")
				}
			}
		}
		require.True(t, ok, "%s: metric %s is not registered by hookyard", where, name)
		used = append(used, name)
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				continue
			}
			require.Contains(t, append(append(extra, lbls...), "job", "instance", "pod", "namespace"), m.Name,
				"%s: %s has no label %q", where, name, m.Name)
		}
		return nil
	})
	return used
}
