// Package health serves /healthz, /readyz and /metrics for every service.
// /healthz says the process is alive; /readyz says it can reach Postgres
// (and whatever else the service registers as a check).
package health

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"
)

// Check reports whether a dependency is usable.
type Check func(ctx context.Context) error

// Register adds /healthz, /readyz and /metrics to e.
func Register(e *echo.Echo, gatherer prometheus.Gatherer, checks ...Check) {
	RegisterProbes(e, nil, checks...)
	RegisterMetrics(e, gatherer)
}

// RegisterProbes adds /healthz and /readyz to e. A failed check answers 503
// without its error text, which can name hosts, users and databases; the
// error goes to log (when not nil) instead.
func RegisterProbes(e *echo.Echo, log *slog.Logger, checks ...Check) {
	e.GET("/healthz", func(c echo.Context) error {
		return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
	})
	e.GET("/readyz", func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		for _, check := range checks {
			if err := check(ctx); err != nil {
				if log != nil {
					log.WarnContext(ctx, "not ready", slog.String("error", err.Error()))
				}
				return c.JSON(http.StatusServiceUnavailable, map[string]string{"status": "unavailable"})
			}
		}
		return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
	})
}

// RegisterMetrics adds the Prometheus page /metrics to e.
func RegisterMetrics(e *echo.Echo, gatherer prometheus.Gatherer) {
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{})))
}

// NewEcho returns an echo instance with the house settings: no banner, no
// default logger (services log through slog), panics recovered.
func NewEcho() *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.Use(middleware.Recover())
	return e
}

// Defaults of ServerConfig.
const (
	ReadHeaderTimeoutDefault = 10 * time.Second
	ReadTimeoutDefault       = 30 * time.Second
	IdleTimeoutDefault       = 60 * time.Second
	MaxConnsDefault          = 1024
)

// ServerConfig bounds what HTTP clients can hold: time to send headers and
// body, idle keep-alive connections, and connections open at once. Without
// these a client that sends headers and then one byte every few seconds keeps
// a connection and a goroutine forever.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading the request headers. Defaults to
	// ReadHeaderTimeoutDefault.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included. Defaults to
	// ReadTimeoutDefault.
	ReadTimeout time.Duration
	// WriteTimeout bounds a request from the end of its headers to the end of
	// the answer. Defaults to ReadTimeout plus 30 s.
	WriteTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long. Defaults to
	// IdleTimeoutDefault.
	IdleTimeout time.Duration
	// MaxConns caps connections open at once; further ones wait in the
	// kernel's accept queue. Before the cap is reached, idle keep-alive
	// connections (and new ones silent for a second) are closed, oldest
	// first, so that cheap requests followed by silence cannot keep the
	// server full for the idle timeout. Defaults to MaxConnsDefault.
	MaxConns int
	// ConnsPerClient caps the connections one remote address may hold;
	// more are closed at accept, before a byte is read. Behind a proxy
	// every connection comes from the proxy's address: set it to MaxConns
	// there. Defaults to 0: no cap per address.
	ConnsPerClient int
	// OnClose is told each connection the server closed to keep clients
	// from holding it (ClosedPerClient, ClosedIdleNearCap), for a metric.
	// Defaults to none.
	OnClose func(reason string)
}

// WithDefaults returns c with defaults filled in.
func (c ServerConfig) WithDefaults() ServerConfig {
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, c.ReadTimeout+30*time.Second)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	c.MaxConns = cmp.Or(c.MaxConns, MaxConnsDefault)
	return c
}

// Serve runs e on addr until ctx ends, then shuts it down gracefully, with
// the default ServerConfig.
func Serve(ctx context.Context, e *echo.Echo, addr string, log *slog.Logger) error {
	return ServeWith(ctx, e, addr, log, ServerConfig{})
}

// ServeWith is Serve with explicit server bounds.
func ServeWith(ctx context.Context, e http.Handler, addr string, log *slog.Logger, cfg ServerConfig) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ServeListener(ctx, e, ln, log, cfg)
}

// ServeListener serves h on an open listener until ctx ends.
func ServeListener(ctx context.Context, h http.Handler, ln net.Listener, log *slog.Logger, cfg ServerConfig) error {
	cfg = cfg.WithDefaults()
	guard := newConnGuard(cfg.MaxConns, cfg.ConnsPerClient, cfg.OnClose)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: cfg.ReadHeaderTimeout, ReadTimeout: cfg.ReadTimeout,
		WriteTimeout: cfg.WriteTimeout, IdleTimeout: cfg.IdleTimeout, MaxHeaderBytes: 64 << 10, ConnState: guard.state}
	limited := guard.listener(netutil.LimitListener(ln, cfg.MaxConns))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(limited) }()
	log.InfoContext(ctx, "listening", slog.String("addr", ln.Addr().String()), slog.Int("max_conns", cfg.MaxConns),
		slog.Duration("read_timeout", cfg.ReadTimeout))
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shut down %s: %w", ln.Addr(), err)
	}
	return nil
}
