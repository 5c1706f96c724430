package tracing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName names hookyard's tracer.
const ScopeName = "github.com/hookyard/hookyard"

// Tracer is hookyard's tracer from the global provider, looked up on each
// call: a provider installed later (Setup, a test's in-memory one) is used
// from then on.
func Tracer() trace.Tracer { return otel.Tracer(ScopeName) }

// noSpan is the non-recording span Start returns when tracing is off.
var noSpan = trace.SpanFromContext(context.Background())

// Start starts a span with hookyard's tracer. With tracing off and no trace
// context in ctx to pass on, it returns ctx itself and a non-recording span
// without allocating.
func Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if !on.Load() && !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, noSpan
	}
	return Tracer().Start(ctx, name, opts...)
}

// w3c is used for hookyard's own carriers whatever the global propagator
// is: the outbox row and the Kafka record always speak W3C trace context.
var w3c propagation.TraceContext

// Header names of W3C trace context.
const (
	HeaderTraceParent = "traceparent"
	HeaderTraceState  = "tracestate"
)

// fields is a carrier of the two W3C fields.
type fields struct{ parent, state string }

func (f *fields) Get(k string) string {
	switch k {
	case HeaderTraceParent:
		return f.parent
	case HeaderTraceState:
		return f.state
	}
	return ""
}

func (f *fields) Set(k, v string) {
	switch k {
	case HeaderTraceParent:
		f.parent = v
	case HeaderTraceState:
		f.state = v
	}
}

func (f *fields) Keys() []string { return []string{HeaderTraceParent, HeaderTraceState} }

// Parent returns the W3C traceparent and tracestate of ctx's span, or
// empty strings when ctx carries no valid span (tracing off and no caller
// context): nothing is stored then.
func Parent(ctx context.Context) (traceparent, tracestate string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	var f fields
	w3c.Inject(ctx, &f)
	return f.parent, f.state
}

// Remote returns the span context a traceparent and tracestate name; it is
// invalid when traceparent is empty or malformed.
func Remote(ctx context.Context, traceparent, tracestate string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(w3c.Extract(ctx, &fields{parent: traceparent, state: tracestate}))
}

// RecordCarrier reads and writes W3C trace context in a Kafka record's
// headers.
type RecordCarrier struct{ R *kgo.Record }

// Get returns the first header named k.
func (c RecordCarrier) Get(k string) string {
	for _, h := range c.R.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces the header named k, or adds it.
func (c RecordCarrier) Set(k, v string) {
	for i, h := range c.R.Headers {
		if h.Key == k {
			c.R.Headers[i].Value = []byte(v)
			return
		}
	}
	c.R.Headers = append(c.R.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
}

// Keys lists the record's header names.
func (c RecordCarrier) Keys() []string {
	out := make([]string, len(c.R.Headers))
	for i, h := range c.R.Headers {
		out[i] = h.Key
	}
	return out
}

// InjectRecord writes ctx's span into r's headers (nothing when ctx carries
// no valid span).
func InjectRecord(ctx context.Context, r *kgo.Record) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		w3c.Inject(ctx, RecordCarrier{r})
	}
}

// FromRecord returns the span context in r's headers; it is invalid when r
// carries none.
func FromRecord(ctx context.Context, r *kgo.Record) trace.SpanContext {
	if len(r.Headers) == 0 {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(w3c.Extract(ctx, RecordCarrier{r}))
}

// EventAttrs are an event's identity as span attributes: never its payload.
func EventAttrs(provider, account, environment, eventID, resourceType, resourceID string) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("hookyard.provider", provider), attribute.String("hookyard.source_account", account),
		attribute.String("hookyard.environment", environment), attribute.String("hookyard.event_id", eventID),
		attribute.String("hookyard.resource_type", resourceType), attribute.String("hookyard.resource_id", resourceID),
	}
}

// End ends span, recording err (if any) as its status and attrs when it is
// recording.
func End(span trace.Span, err error, attrs ...attribute.KeyValue) {
	EndAt(span, err, time.Time{}, attrs...)
}

// EndAt is End at a given time (zero: now).
func EndAt(span trace.Span, err error, at time.Time, attrs ...attribute.KeyValue) {
	if span.IsRecording() {
		span.SetAttributes(attrs...)
		if err != nil {
			err = Safe(err)
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	if at.IsZero() {
		span.End()
		return
	}
	span.End(trace.WithTimestamp(at))
}

// Safe is err as a span may show it. A Postgres error is shown by its
// SQLSTATE only: its message and detail can quote the row's values, that
// is, the event's data.
func Safe(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Errorf("postgres: SQLSTATE %s", pgErr.Code)
	}
	return err
}
