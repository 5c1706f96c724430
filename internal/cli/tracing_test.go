package cli

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/tracing"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, a service's spans reach the
// collector over OTLP/HTTP, at the latest when the service stops (the flush
// at exit). Fails if the exporter is not built from the standard variables
// or if spans queued at exit are dropped.
func TestSpansAreExportedOverOTLPWhenTheEndpointIsSet(t *testing.T) {
	var posts atomic.Int32
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collector.Close)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Cleanup(tracing.Uninstall)

	stop, err := startTracing(t.Context(), "receiver", slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	_, span := tracing.Start(t.Context(), "test span")
	require.True(t, span.IsRecording())
	span.End()
	stop()
	require.GreaterOrEqual(t, posts.Load(), int32(1))
}
