package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/internal/receiptsim"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/pkg/tracing"
)

// recorder holds every span ended in this package's tests: the tracer
// provider is global, so it is installed once, and each test picks its own
// webhook's spans by event id and trace id.
var (
	recorder   = tracetest.NewSpanRecorder()
	recordedTP = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(recorder))
)

func TestMain(m *testing.M) {
	tracing.Install(recordedTP)
	os.Exit(m.Run())
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// spanOf waits for the span named name whose event id is eventID (and, when
// reason is not empty, whose reason is reason).
func spanOf(t *testing.T, name, eventID, reason string) sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range recorder.Ended() {
			if s.Name() == name && attr(s, "hookyard.event_id") == eventID && (reason == "" || attr(s, "hookyard.reason") == reason) {
				return s
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q span for event %s", name, eventID)
	return nil
}

func inTrace(id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range recorder.Ended() {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// tree prints a trace's spans as a tree with their start offsets and
// durations (docs/operations.md's example trace comes from here).
func tree(spans []sdktrace.ReadOnlySpan) string {
	sort.Slice(spans, func(i, j int) bool { return spans[i].StartTime().Before(spans[j].StartTime()) })
	children := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID(); ids[p] {
			children[p] = append(children[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	t0 := roots[0].StartTime()
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		fmt.Fprintf(&b, "%-44s +%7.2fms %8.2fms\n", strings.Repeat("  ", depth)+s.Name(),
			float64(s.StartTime().Sub(t0).Microseconds())/1000, float64(s.EndTime().Sub(s.StartTime()).Microseconds())/1000)
		for _, c := range children[s.SpanContext().SpanID()] {
			walk(c, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// One webhook is one trace: the receiver's request span, the intake commit,
// the relay's publish (carried through the outbox row), the processor's
// decision on the event (carried through the Kafka record's W3C headers),
// the provider fetch and the projection write, each the child of the one
// before. Spans name the event by its identity, never by its payload. Fails
// if any hop drops the trace context (a new trace starts there) or if a
// span carries a payload field.
func TestOneWebhookIsOneTraceFromReceiverToProjectionWrite(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	ctx := context.Background()
	// The customer id is in the payload only: no span may show it.
	s := stripesim.Subscription{ID: "sub_traced", Customer: "cus_payload_only_7f3a", Status: "active"}
	p.Sim.Put(s)
	evID, _, err := p.Sim.Send(ctx, "customer.subscription.created", s)
	require.NoError(t, err)
	p.WaitIdle()

	rcv := spanOf(t, "POST /webhooks/:endpoint_id", evID, "")
	intake := spanOf(t, "inbox intake commit", evID, "")
	publish := spanOf(t, "outbox-relay publish", evID, "webhook")
	event := spanOf(t, "processor event", evID, "webhook")
	var write, fetch sdktrace.ReadOnlySpan
	p.Eventually(func() bool {
		for _, sp := range inTrace(rcv.SpanContext().TraceID()) {
			switch {
			case sp.Name() == "projection write" && sp.Parent().SpanID() == event.SpanContext().SpanID():
				write = sp
			case sp.Name() == "stripe GET" && sp.Parent().SpanID() == event.SpanContext().SpanID():
				fetch = sp
			}
		}
		return write != nil && fetch != nil
	}, "projection write and fetch spans under the event's span")

	chain := []sdktrace.ReadOnlySpan{rcv, intake, publish, event, write}
	for i, sp := range chain {
		require.Equal(t, rcv.SpanContext().TraceID(), sp.SpanContext().TraceID(), "%s is in the webhook's trace", sp.Name())
		if i > 0 {
			require.Equal(t, chain[i-1].SpanContext().SpanID(), sp.Parent().SpanID(), "%s is the child of %s", sp.Name(), chain[i-1].Name())
		}
	}
	require.False(t, rcv.Parent().IsValid(), "the request span is the trace's root")
	require.Equal(t, "/v1/subscriptions/sub_traced", attr(fetch, "url.path"))

	// The processor's event span names the event by identity and position.
	require.Equal(t, "stripe", attr(event, "hookyard.provider"))
	require.Equal(t, pipelinetest.StripeAccount, attr(event, "hookyard.source_account"))
	require.Equal(t, "test", attr(event, "hookyard.environment"))
	require.Equal(t, "subscription", attr(event, "hookyard.resource_type"))
	require.Equal(t, "sub_traced", attr(event, "hookyard.resource_id"))
	require.Equal(t, "fetched", attr(event, "hookyard.outcome"))
	require.NotEmpty(t, attr(event, "messaging.destination.partition.id"))
	require.NotEmpty(t, attr(event, "messaging.kafka.offset"))
	require.Equal(t, "200", attr(rcv, "http.response.status_code"))

	// The batch span is a root of its own, linked to the event's publish.
	var linked bool
	for _, sp := range recorder.Ended() {
		if sp.Name() != "processor batch" {
			continue
		}
		for _, l := range sp.Links() {
			linked = linked || l.SpanContext.SpanID() == publish.SpanContext().SpanID()
		}
	}
	require.True(t, linked, "a batch span links the event's publication")

	// The Kafka record carries the publish span as W3C traceparent.
	recs := p.Records(1)
	require.Len(t, recs, 1)
	sc := tracing.FromRecord(ctx, recs[0])
	require.Equal(t, publish.SpanContext().SpanID(), sc.SpanID())

	spans := inTrace(rcv.SpanContext().TraceID())
	for _, sp := range spans {
		for _, kv := range sp.Attributes() {
			require.NotContains(t, kv.Value.String(), "cus_payload_only_7f3a", "span %s attribute %s shows the payload", sp.Name(), kv.Key)
		}
	}
	t.Logf("trace of one webhook:\n%s", tree(spans))
}

// A replayed event starts a trace of its own that links to the webhook's
// original trace (its intake span), so an operator finds every later attempt
// from the original trace without stretching it over days. Fails if the
// re-enqueued message loses the traceparent (no link) or if the replay is
// folded into the original trace.
func TestReplayedEventLinksToItsOriginalTrace(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	ctx := context.Background()
	s := stripesim.Subscription{ID: "sub_replayed_trace", Customer: "cus_r", Status: "active"}
	p.Sim.Put(s)
	evID, _, err := p.Sim.Send(ctx, "customer.subscription.created", s)
	require.NoError(t, err)
	p.WaitIdle()
	intake := spanOf(t, "inbox intake commit", evID, "")

	n, err := inbox.Replay(ctx, p.Pool, inbox.Key{Provider: "stripe", SourceAccount: pipelinetest.StripeAccount, Environment: "test", EventID: evID})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	p.WaitIdle()

	publish := spanOf(t, "outbox-relay publish", evID, "replay")
	require.NotEqual(t, intake.SpanContext().TraceID(), publish.SpanContext().TraceID(), "a replay has its own trace")
	require.False(t, publish.Parent().IsValid())
	require.Len(t, publish.Links(), 1)
	require.Equal(t, intake.SpanContext().TraceID(), publish.Links()[0].SpanContext.TraceID())
	require.Equal(t, intake.SpanContext().SpanID(), publish.Links()[0].SpanContext.SpanID())
	event := spanOf(t, "processor event", evID, "replay")
	require.Equal(t, publish.SpanContext().SpanID(), event.Parent().SpanID(), "the replay's decision continues the replay's trace")
}

// An effect's first attempt continues the trace of the webhook that
// recorded it (the send is a child of the processor's span of that event);
// a retry starts its own trace linked to it. Fails if the action row loses
// the event's trace context, or if retries are folded into the original.
func TestEffectSendContinuesTheWebhooksTraceAndRetriesLinkToIt(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	ctx := context.Background()
	inv := map[string]any{"id": "in_traced", "object": "invoice", "subscription": "sub_inv_traced", "status": "paid", "amount_paid": 100}
	evID, _, err := p.Sim.Send(ctx, "invoice.paid", inv)
	require.NoError(t, err)
	p.WaitIdle()
	event := spanOf(t, "processor event", evID, "webhook")

	srv := httptest.NewServer(receiptsim.New(func(_ context.Context, r receiptsim.Request, _ http.Header) int {
		if r.N == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}))
	t.Cleanup(srv.Close)
	snd, err := effects.New(p.Pool, p.Log, effects.Config{ReceiptURL: srv.URL, BackoffBase: 10 * time.Millisecond,
		BackoffMax: 20 * time.Millisecond, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	var first, retry sdktrace.ReadOnlySpan
	p.Eventually(func() bool {
		_, err := snd.SendDue(ctx)
		require.NoError(t, err)
		for _, sp := range recorder.Ended() {
			if sp.Name() != "effect send" || attr(sp, "hookyard.event_id") != evID {
				continue
			}
			switch attr(sp, "hookyard.action.attempt") {
			case "1":
				first = sp
			case "2":
				retry = sp
			}
		}
		return first != nil && retry != nil
	}, "two attempts at the receipt")
	require.Equal(t, event.SpanContext().TraceID(), first.SpanContext().TraceID())
	require.Equal(t, event.SpanContext().SpanID(), first.Parent().SpanID())
	require.Equal(t, "failed", attr(first, "hookyard.outcome"))
	require.NotEqual(t, event.SpanContext().TraceID(), retry.SpanContext().TraceID())
	require.Len(t, retry.Links(), 1)
	require.Equal(t, event.SpanContext().SpanID(), retry.Links()[0].SpanContext.SpanID())
	require.Equal(t, "sent", attr(retry, "hookyard.outcome"))
}
