package tracing_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookyard/hookyard/pkg/tracing"
)

// The public port never takes the caller's trace context as its parent: a
// request that claims a sampled trace gets a span of a new trace of ours
// (our sampler decides), linked to the caller's context, and nothing
// downstream sees the caller's trace id. Fails if the middleware extracts
// the header into the request's context again.
func TestCallerTraceContextIsALinkNeverTheParent(t *testing.T) {
	t.Parallel()
	const callerTrace = "0af7651916cd43dd8448eb211c80319c"
	const callerSpan = "b7ad6b7169203331"
	e := echo.New()
	var seen trace.SpanContext
	e.POST("/public/:endpoint_id", tracing.Echo("/public/:endpoint_id")(func(c echo.Context) error {
		seen = trace.SpanContextFromContext(c.Request().Context())
		return c.NoContent(http.StatusOK)
	}))
	req := httptest.NewRequest(http.MethodPost, "/public/caller-link-test", nil)
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	e.ServeHTTP(httptest.NewRecorder(), req)

	require.True(t, seen.IsValid())
	require.NotEqual(t, callerTrace, seen.TraceID().String(), "the handler runs in a trace of ours, not the caller's")
	for _, s := range recorder.Ended() {
		if s.SpanContext().SpanID() != seen.SpanID() {
			continue
		}
		require.False(t, s.Parent().IsValid(), "the server span is a root")
		require.Len(t, s.Links(), 1)
		require.Equal(t, callerTrace, s.Links()[0].SpanContext.TraceID().String())
		require.Equal(t, callerSpan, s.Links()[0].SpanContext.SpanID().String())
		return
	}
	t.Fatal("no server span recorded")
}
