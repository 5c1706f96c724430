package tracing

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ServiceNameDefault is the service.name spans carry when OTEL_SERVICE_NAME
// is unset; the subcommand is added as hookyard.service.
const ServiceNameDefault = "hookyard"

// ErrUnknownExporter is returned by Setup for an OTEL_TRACES_EXPORTER or
// OTLP protocol it does not support.
var ErrUnknownExporter = errors.New("tracing: unsupported exporter")

// Enabled reports whether the environment asks for traces: an OTLP endpoint
// is set, or OTEL_TRACES_EXPORTER names an exporter other than "none".
func Enabled(getenv func(string) string) bool {
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true
}

// Setup installs the global tracer provider and propagator when the
// environment asks for traces (see Enabled), exporting over OTLP (http/protobuf,
// or gRPC when OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL is "grpc"); the exporter
// reads the other standard variables itself (headers, timeout, TLS,
// OTEL_TRACES_SAMPLER through the SDK). Otherwise it installs nothing and
// returns a no-op shutdown. Shutdown flushes the spans still queued.
func Setup(ctx context.Context, log *slog.Logger, service string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	if !Enabled(os.Getenv) {
		return noop, nil
	}
	if e := os.Getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return noop, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q (only otlp or none)", ErrUnknownExporter, e)
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	var exp sdktrace.SpanExporter
	switch proto {
	case "", "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return noop, fmt.Errorf("%w: OTLP protocol %q (http/protobuf or grpc)", ErrUnknownExporter, proto)
	}
	if err != nil {
		return noop, fmt.Errorf("tracing: start OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("hookyard.service", service)))
	if err != nil {
		return noop, fmt.Errorf("tracing: build resource: %w", err)
	}
	if os.Getenv("OTEL_SERVICE_NAME") == "" && !strings.Contains(os.Getenv("OTEL_RESOURCE_ATTRIBUTES"), "service.name=") {
		res, _ = resource.Merge(res, resource.NewSchemaless(attribute.String("service.name", ServiceNameDefault)))
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Install(tp)
	log.Info("tracing on: exporting spans over OTLP", slog.String("protocol", cmp.Or(proto, "http/protobuf")))
	return tp.Shutdown, nil
}

// Install makes tp the global tracer provider and W3C trace context the
// global propagator (tests install an SDK provider with an in-memory
// exporter through it).
func Install(tp *sdktrace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	on.Store(true)
}

// Uninstall puts back the no-op tracer provider (benchmarks compare both).
func Uninstall() {
	on.Store(false)
	otel.SetTracerProvider(noop.NewTracerProvider())
}

// on is set while a recording provider is installed. Off, Start and Echo
// return at once for work that carries no trace context: no context, span
// or request copy is allocated on the intake path.
var on atomic.Bool
