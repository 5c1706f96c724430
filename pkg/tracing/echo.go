package tracing

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Echo is middleware that wraps each request of route in a server span,
// child of the caller's W3C trace context when it sent one. The span names
// the method and route, and records the status; never headers or body (a
// signature header is a credential).
func Echo(route string) echo.MiddlewareFunc {
	name := "POST " + route
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			// Indexed by the canonical key: Header.Get would allocate the
			// canonical form of "traceparent" on every request.
			if !on.Load() && len(req.Header["Traceparent"]) == 0 {
				return next(c)
			}
			ctx := w3c.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
			ctx, span := Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
			defer span.End()
			if span.IsRecording() {
				span.SetAttributes(attribute.String("http.request.method", req.Method), attribute.String("http.route", route),
					attribute.String("hookyard.endpoint_id", c.Param("endpoint_id")))
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
