package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookyard/hookyard/pkg/tracing"
)

// tracingFlushTimeout bounds the flush of queued spans at exit: a collector
// that is down must not hold a stopping service.
const tracingFlushTimeout = 5 * time.Second

// startTracing exports traces over OTLP when the standard OpenTelemetry
// variables ask for it (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_EXPORTER,
// ...), and does nothing otherwise. The returned stop flushes queued spans.
func startTracing(ctx context.Context, cmd string, log *slog.Logger) (stop func(), err error) {
	shutdown, err := tracing.Setup(ctx, log, cmd)
	if err != nil {
		return func() {}, err
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingFlushTimeout)
		defer cancel()
		if err := shutdown(ctx); err != nil {
			log.Warn("flush traces at exit", slog.String("error", err.Error()))
		}
	}, nil
}
