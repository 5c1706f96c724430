package outboxrelay

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/tracing"
)

var traceField = []byte(`"traceparent"`)

// startPublish starts the span of one record's publication and writes its
// context into the record's headers, for the processor to continue. A
// webhook's first publication continues the intake's trace; a retry, a
// requeue or a replay starts a trace of its own linked to the original one,
// so that the original trace is not stretched over days of attempts and
// each attempt is still found from it. A message without a traceparent
// (tracing off at intake) costs a byte search, no span.
func startPublish(ctx context.Context, rec *kgo.Record) trace.Span {
	if !bytes.Contains(rec.Value, traceField) {
		return nil
	}
	var m message.Message
	if err := json.Unmarshal(rec.Value, &m); err != nil {
		return nil
	}
	remote := tracing.Remote(ctx, m.TraceParent, m.TraceState)
	if !remote.IsValid() {
		return nil
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindProducer)}
	if m.Reason == message.ReasonWebhook || m.Reason == "" {
		ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
	} else {
		opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: remote}))
	}
	ctx, span := tracing.Start(ctx, "outbox-relay publish", opts...)
	if span.IsRecording() {
		span.SetAttributes(append(tracing.EventAttrs(m.Provider, m.SourceAccount, m.Environment, m.EventID, m.Type, m.ID),
			attribute.String("hookyard.reason", m.Reason), attribute.String("messaging.system", "kafka"))...)
	}
	tracing.InjectRecord(ctx, rec)
	return span
}

// endPublish ends a publication's span with the broker's answer.
func endPublish(span trace.Span, r *kgo.Record, err error) {
	if span == nil {
		return
	}
	if r == nil {
		tracing.End(span, err)
		return
	}
	tracing.End(span, err, attribute.String("messaging.destination.name", r.Topic),
		attribute.Int("messaging.destination.partition.id", int(r.Partition)), attribute.Int64("messaging.kafka.offset", r.Offset))
}
