package tracing_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookyard/hookyard/pkg/tracing"
)

// Tracing is off unless the standard OpenTelemetry variables ask for it:
// an OTLP endpoint, or an exporter other than "none". Fails if a service
// with no collector configured starts exporting (and retrying) spans.
func TestTracingIsOffUnlessTheOTELVariablesAskForIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{env: nil, want: false},
		{env: map[string]string{"OTEL_SERVICE_NAME": "x"}, want: false},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: true},
		{env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, want: true},
		{env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, want: false},
	} {
		require.Equal(t, tc.want, tracing.Enabled(func(k string) string { return tc.env[k] }), "%v", tc.env)
	}
}

// An exporter or protocol hookyard does not ship is refused at start, not
// silently replaced by no tracing.
func TestUnsupportedExporterIsRefused(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	_, err := tracing.Setup(t.Context(), log, "receiver")
	require.ErrorIs(t, err, tracing.ErrUnknownExporter)
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	_, err = tracing.Setup(t.Context(), log, "receiver")
	require.ErrorIs(t, err, tracing.ErrUnknownExporter)
}

// A Kafka record's W3C header is replaced, not repeated, when a record is
// published again, and reads back as the span that wrote it.
func TestRecordHeadersCarryOneTraceParent(t *testing.T) {
	t.Parallel()
	sc := func(b byte) trace.SpanContext {
		return trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{b, 1}, SpanID: trace.SpanID{b, 2}, TraceFlags: trace.FlagsSampled})
	}
	r := &kgo.Record{Headers: []kgo.RecordHeader{{Key: "other", Value: []byte("x")}}}
	require.False(t, tracing.FromRecord(context.Background(), r).IsValid())
	tracing.InjectRecord(trace.ContextWithSpanContext(context.Background(), sc(1)), r)
	tracing.InjectRecord(trace.ContextWithSpanContext(context.Background(), sc(2)), r)
	n := 0
	for _, h := range r.Headers {
		if h.Key == tracing.HeaderTraceParent {
			n++
		}
	}
	require.Equal(t, 1, n)
	got := tracing.FromRecord(context.Background(), r)
	require.Equal(t, sc(2).TraceID(), got.TraceID())
	require.Equal(t, sc(2).SpanID(), got.SpanID())
	tracing.InjectRecord(context.Background(), r) // no span: headers untouched
	require.Len(t, r.Headers, 2)
}
