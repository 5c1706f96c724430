package cli

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/config"
)

// A relay started before its brokers answer (a docker compose or
// Kubernetes rollout starts everything at once) waits for them: it does not
// exit, /readyz answers 503 meanwhile, and once a broker appears the relay
// creates its topic and turns ready. Fails if the relay creates the topic
// once at start and exits on "connection refused".
func TestRelayStartedBeforeItsBrokersWaitsForThem(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	brokerAddr := freeAddr(t)
	_, port, err := net.SplitHostPort(brokerAddr)
	require.NoError(t, err)
	topicName := kafkatest.UniqueName(t, "hookyard.relay-ready")
	vars := map[string]string{"KAFKA_BROKERS": brokerAddr, "METRICS_ADDR": freeAddr(t)}
	cfg, err := config.Parse([]byte("endpoints: []\nkafka:\n  topic: "+topicName+"\n  partitions: 2\n"),
		func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	require.NoError(t, err)
	e := &env{cfg: cfg, log: pipelinetest.Logger(t), pool: s.Pool, reg: newRegistry()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runRelay(ctx, e, nil, nil) }()

	status := func() int {
		resp, err := http.Get("http://" + cfg.MetricsAddr + "/readyz")
		if err != nil {
			return 0 // not listening yet
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(30 * time.Second); status() != http.StatusServiceUnavailable; time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("relay exited while its brokers did not answer: %v", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the relay's /readyz never answered 503")
	}
	for range 20 {
		require.Equal(t, http.StatusServiceUnavailable, status(), "ready without brokers")
		select {
		case err := <-done:
			t.Fatalf("relay exited while its brokers did not answer: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}

	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	cluster, err := kfake.NewCluster(kfake.Ports(p))
	require.NoError(t, err)
	defer cluster.Close()
	for deadline := time.Now().Add(60 * time.Second); status() != http.StatusOK; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("relay exited after a broker appeared: %v", err)
		default:
		}
		require.True(t, time.Now().Before(deadline), "the relay never turned ready after a broker appeared")
	}
	cancel()
	require.NoError(t, <-done)
}
