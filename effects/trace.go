package effects

import (
	"github.com/hookyard/hookyard/pkg/action"

	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookyard/hookyard/pkg/tracing"
)

// startSend starts the span of one attempt at an action. The first attempt
// continues the trace of the event that recorded the action; a later one
// (a retry, an interrupted attempt sent again) starts its own trace linked
// to it, so that a webhook's trace is not stretched over the retry window.
func startSend(ctx context.Context, c action.Claimed) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}
	if sc := tracing.Remote(ctx, c.TraceParent, ""); sc.IsValid() {
		if c.Attempts <= 1 {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		} else {
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	ctx, span := tracing.Start(ctx, "effect send", opts...)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("hookyard.provider", c.Key.Provider), attribute.String("hookyard.source_account", c.Key.SourceAccount),
			attribute.String("hookyard.environment", c.Key.Environment), attribute.String("hookyard.action.kind", c.Key.Kind),
			attribute.String("hookyard.action.subject_id", c.Key.SubjectID), attribute.String("hookyard.event_id", c.EventID),
			attribute.Int("hookyard.action.attempt", c.Attempts))
	}
	return ctx, span
}
