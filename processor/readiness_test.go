package processor_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/processor"
)

// readyz serves /readyz over checks, as the processor's metrics port does.
func readyz(t *testing.T, checks ...health.Check) func() int {
	t.Helper()
	e := health.NewEcho()
	health.RegisterProbes(e, nil, checks...)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return func() int {
		resp, err := http.Get(srv.URL + "/readyz")
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
}

// eventually waits (far above normal) for status to answer want.
func eventually(t *testing.T, status func() int, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for status() != want {
		require.True(t, time.Now().Before(deadline), what)
		time.Sleep(50 * time.Millisecond)
	}
}

// A processor waiting for its topic is not ready: /readyz answers 503 for
// the whole wait, and 200 only once it owns its assignment. A member of the
// group with no partition to own (more processors than partitions) is ready
// once it joined. Fails if readiness only reports a fatal stop, or counts
// partitions.
func TestProcessorIsNotReadyUntilItOwnsItsAssignment(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{NoProcessor: true})
	late := kafkatest.UniqueName(t, "hookyard.ready")
	start := func(id string) (*processor.Processor, <-chan error) {
		cfg := p.ProcessorConfig(id)
		cfg.Topic = late
		cfg.Group = late
		cfg.Registerer = prometheus.NewRegistry()
		return startProcessor(t, p, cfg)
	}
	first, done := start("first")
	status := readyz(t, first.Check)
	for range 20 {
		require.Equal(t, http.StatusServiceUnavailable, status(), "ready while its topic does not exist")
		select {
		case err := <-done:
			t.Fatalf("processor ended while waiting for its topic: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}

	createTopic(t, p.Kafka.Brokers, late, 1)
	eventually(t, status, http.StatusOK, "never ready after its topic was created")

	second, _ := start("second")
	eventually(t, readyz(t, second.Check), http.StatusOK, "a member with no partition to own never became ready")
	eventually(t, status, http.StatusOK, "the first member stayed unready after the rebalance")
}
