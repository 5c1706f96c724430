package processor

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/tracing"
)

// eventTrace is one record's span: a child of the publication in its
// headers, so that a webhook's trace runs on from the relay into its
// decision. Untraced records (tracing off when they were published) get a
// span under the batch's.
type eventTrace struct {
	ctx  context.Context
	span trace.Span
	// outcome is what became of the event, set before the span ends.
	outcome string
}

// batchTrace is the span of one handled batch of one partition, linked to
// every traced record in it; the batch is shared by many webhooks, so it is
// a root of its own rather than a child of any one of them.
type batchTrace struct {
	ctx    context.Context
	span   trace.Span
	events []*eventTrace
}

func (w *worker) startBatchTrace(ctx context.Context, recs []*kgo.Record) *batchTrace {
	var links []trace.Link
	for _, r := range recs {
		if sc := tracing.FromRecord(ctx, r); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	ctx, span := tracing.Start(ctx, "processor batch", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("messaging.destination.partition.id", int(w.part)),
			attribute.Int("messaging.batch.message_count", len(recs)))
	}
	return &batchTrace{ctx: ctx, span: span}
}

// event starts the span of record r carrying m.
func (b *batchTrace) event(r *kgo.Record, m message.Message) *eventTrace {
	ctx := b.ctx
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	if sc := tracing.FromRecord(ctx, r); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: trace.SpanContextFromContext(b.ctx)}))
	}
	ctx, span := tracing.Start(ctx, "processor event", opts...)
	if span.IsRecording() {
		span.SetAttributes(append(tracing.EventAttrs(m.Provider, m.SourceAccount, m.Environment, m.EventID, m.Type, m.ID),
			attribute.String("hookyard.kind", m.Kind), attribute.String("hookyard.reason", m.Reason),
			attribute.Int("messaging.destination.partition.id", int(r.Partition)), attribute.Int64("messaging.kafka.offset", r.Offset))...)
	}
	ev := &eventTrace{ctx: ctx, span: span}
	b.events = append(b.events, ev)
	return ev
}

// end ends every event's span and the batch's, with the batch's error.
func (b *batchTrace) end(err error) {
	for _, ev := range b.events {
		if ev.span.IsRecording() {
			tracing.End(ev.span, err, attribute.String("hookyard.outcome", ev.outcome))
		}
	}
	tracing.End(b.span, err)
}

// writeSpans records, under each event's span, the batch transaction that
// wrote its projection and marked it: one transaction for the whole batch,
// so each span has the transaction's times and the event's own outcome.
func writeSpans(steps []*step, start, end time.Time, err error) {
	for _, st := range steps {
		if st.trace == nil || !st.trace.span.IsRecording() {
			continue
		}
		if err == nil {
			st.trace.outcome = st.outcome
		}
		_, span := tracing.Start(st.trace.ctx, "projection write", trace.WithTimestamp(start))
		span.SetAttributes(attribute.String("hookyard.outcome", st.outcome), attribute.Int("hookyard.batch.events", len(steps)))
		tracing.EndAt(span, err, end)
	}
}

// parent is the event span's W3C traceparent, for an action it records
// (nil when untraced: the column stays NULL).
func (e *eventTrace) parent() *string {
	if e == nil {
		return nil
	}
	if tp, _ := tracing.Parent(e.ctx); tp != "" {
		return &tp
	}
	return nil
}
