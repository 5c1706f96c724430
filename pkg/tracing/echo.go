package tracing

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Echo is middleware that wraps each request of route in a server span.
// The route is public: the caller's W3C trace context is not trusted as a
// parent (its sampled flag would make us export whatever an anonymous
// client asks for, and its trace id would be stored with the event). The
// span is a new root, sampled by our own sampler, with a link to the
// caller's context when it sent a valid one. With tracing off, nothing
// from the caller is kept. The span names the method and route, and
// records the status; never headers or body (a signature header is a
// credential).
func Echo(route string) echo.MiddlewareFunc {
	name := "POST " + route
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			// Indexed by the canonical key: Header.Get would allocate the
			// canonical form of "traceparent" on every request.
			if !on.Load() {
				return next(c)
			}
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithNewRoot()}
			if len(req.Header["Traceparent"]) > 0 {
				if caller := trace.SpanContextFromContext(w3c.Extract(context.Background(), propagation.HeaderCarrier(req.Header))); caller.IsValid() {
					opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
				}
			}
			ctx, span := Start(req.Context(), name, opts...)
			defer span.End()
			if span.IsRecording() {
				id := c.Param("endpoint_id")
				if len(id) > 64 {
					id = id[:64]
				}
				span.SetAttributes(attribute.String("http.request.method", req.Method), attribute.String("http.route", route),
					attribute.String("hookyard.endpoint_id", strings.ToValidUTF8(id, "?")))
			}
			c.SetRequest(req.WithContext(ctx))
			err := next(c)
			if span.IsRecording() {
				status := c.Response().Status
				span.SetAttributes(attribute.Int("http.response.status_code", status))
				if status >= http.StatusInternalServerError {
					span.SetStatus(codes.Error, http.StatusText(status))
				}
			}
			return err
		}
	}
}
