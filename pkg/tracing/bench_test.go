package tracing_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/tracing"
	"github.com/hookyard/hookyard/receiver"
)

// BenchmarkReceiverIntake is one signed Stripe delivery through the
// receiver's handler and its committed intake, with tracing off (the no-op
// provider a service runs with when no OTEL variable is set) and on (every
// span sampled, batched to an exporter that drops them, so the cost measured
// is the instrumentation's, not a collector's). Compare ns/op and allocs/op:
//
//	go test -run '^$' -bench BenchmarkReceiverIntake -benchmem -count 5 ./pkg/tracing/
func BenchmarkReceiverIntake(b *testing.B) {
	s := dbtest.New(b)
	ep := provider.Endpoint{ID: "stripe-bench", Provider: provider.Stripe, SourceAccount: "acct_bench", Environment: "test",
		Secrets: []string{"whsec_bench"}}
	rcv, err := receiver.New(s.Pool, slog.New(slog.NewTextHandler(io.Discard, nil)), receiver.Config{Endpoints: []provider.Endpoint{ep}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rcv.Stop)
	h := rcv.Handler()
	defer tracing.Install(recordedTP)
	n := 0
	for _, mode := range []struct {
		name string
		set  func()
	}{
		{"tracing=off", tracing.Uninstall},
		{"tracing=on", func() {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			b.Cleanup(func() { _ = tp.Shutdown(b.Context()) })
			tracing.Install(tp)
		}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			mode.set()
			for b.Loop() {
				n++
				body := fmt.Appendf(nil, `{"id":"evt_bench_%d","object":"event","type":"customer.subscription.updated","livemode":false,`+
					`"api_version":"2024-06-20","data":{"object":{"id":"sub_%d","object":"subscription","status":"active"}}}`, n, n%64)
				req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe-bench", strings.NewReader(string(body)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(stripe.SignatureHeader, stripe.Sign(body, "whsec_bench", time.Now()))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

// BenchmarkEchoRequestSpan isolates the request span's cost from the
// database's: the receiver's middleware around a handler that does nothing,
// without the middleware, with it under the no-op provider (tracing off),
// and with it under a sampling SDK provider.
//
//	go test -run '^$' -bench BenchmarkEchoRequestSpan -benchmem ./pkg/tracing/
func BenchmarkEchoRequestSpan(b *testing.B) {
	defer tracing.Install(recordedTP)
	const route = "/webhooks/:endpoint_id"
	for _, mode := range []struct {
		name string
		mw   []echo.MiddlewareFunc
		set  func()
	}{
		{"middleware=none", nil, tracing.Uninstall},
		{"tracing=off", []echo.MiddlewareFunc{tracing.Echo(route)}, tracing.Uninstall},
		{"tracing=on", []echo.MiddlewareFunc{tracing.Echo(route)}, func() {
			tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
			b.Cleanup(func() { _ = tp.Shutdown(b.Context()) })
			tracing.Install(tp)
		}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			mode.set()
			e := echo.New()
			e.POST(route, func(c echo.Context) error { return c.NoContent(http.StatusOK) }, mode.mw...)
			req := httptest.NewRequest(http.MethodPost, "/webhooks/stripe-bench", nil)
			for b.Loop() {
				w := httptest.NewRecorder()
				e.ServeHTTP(w, req)
			}
		})
	}
}
