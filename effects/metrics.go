package effects

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	sends       *prometheus.CounterVec
	interrupted *prometheus.CounterVec
	duration    *prometheus.HistogramVec
}

func newMetrics() *metrics {
	return &metrics{
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_effects_sends_total",
			Help: "Attempts of external effects by kind and outcome: sent, failed (retried), ambiguous (retried with the same key), dead."},
			[]string{"kind", "outcome"}),
		interrupted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_effects_interrupted_total",
			Help: "Actions claimed again after their sender's lease expired mid-attempt (a sender killed or frozen); sent again with the same key."},
			[]string{"kind"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hookyard_effects_send_seconds",
			Help: "Duration of one attempt's request, by kind.", Buckets: prometheus.ExponentialBuckets(0.005, 3, 8)},
			[]string{"kind"}),
	}
}

// register adds the metrics to reg; a second sender in the same process
// shares the first one's.
func (m *metrics) register(reg prometheus.Registerer) error {
	var err error
	if m.sends, err = registerOrExisting(reg, m.sends); err != nil {
		return err
	}
	if m.interrupted, err = registerOrExisting(reg, m.interrupted); err != nil {
		return err
	}
	m.duration, err = registerOrExisting(reg, m.duration)
	return err
}

func registerOrExisting[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("register effects metrics: %w", err)
	}
	return c, nil
}
