// Package tracing sets up OpenTelemetry tracing from the standard OTEL_*
// environment variables and carries W3C trace context across the two hops
// that are not HTTP: the outbox row (the message's traceparent) and the
// Kafka record (its headers).
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER asks for it;
// off, the global tracer provider stays OpenTelemetry's no-op one, and
// instrumentation costs a context lookup, no span. It must never put a
// webhook's payload, headers or secrets in an attribute: spans name an
// event by its identity only.
package tracing
