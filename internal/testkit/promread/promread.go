// Package promread reads series back from a Prometheus registry: what tests
// assert on and what the bench measures with.
package promread

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Series returns the series of the metric name whose labels include want,
// and whether the metric was gathered at all.
func Series(g prometheus.Gatherer, name string, want map[string]string) ([]*dto.Metric, bool, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, false, fmt.Errorf("gather metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var out []*dto.Metric
	next:
		for _, m := range mf.GetMetric() {
			have := make(map[string]string, len(m.GetLabel()))
			for _, lp := range m.GetLabel() {
				have[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			out = append(out, m)
		}
		return out, true, nil
	}
	return nil, false, nil
}

// Sum adds the counter, gauge and untyped values of those series (0 when
// there are none), and says whether the metric was gathered at all.
func Sum(g prometheus.Gatherer, name string, want map[string]string) (float64, bool, error) {
	ms, found, err := Series(g, name, want)
	var sum float64
	for _, m := range ms {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return sum, found, err
}
