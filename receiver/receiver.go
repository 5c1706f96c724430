// Package receiver is the public intake: POST /webhooks/{endpoint_id}.
//
// It verifies each delivery over its raw bytes with the endpoint's provider
// adapter, takes provider, account and environment from the endpoint alone,
// and answers 2xx only after the event's inbox row and outbox row committed
// together. It must never answer 2xx to an unauthenticated request or when
// the database did not confirm the commit, and it never logs bodies or
// secrets.
package receiver

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/semaphore"

	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/registry"
	"github.com/hookyard/hookyard/pkg/tracing"
)

// Defaults of Config.
const (
	AddrDefault          = "127.0.0.1:8080"
	BodyLimitDefault     = 1 << 20
	CommitTimeoutDefault = 5 * time.Second
	// GitHubBodyLimitDefault is GitHub's own cap on a delivery: "Payloads
	// are capped at 25 MB" (docs.github.com/en/webhooks/webhook-events-and-payloads#payload-cap).
	GitHubBodyLimitDefault = 25 << 20
	// ReadTimeoutDefault is GitHub's delivery deadline: it gives up on a
	// delivery after 10 s (docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/troubleshooting-webhooks#timed-out).
	ReadTimeoutDefault    = 10 * time.Second
	MaxConnsDefault       = 1024
	BodyBytesDefault      = 64 << 20
	bodyBudgetWaitDefault = time.Second
	// FirstByteTimeoutDefault bounds the wait for a body's first byte once
	// the headers are in: providers send the body right behind them.
	FirstByteTimeoutDefault = 2 * time.Second
)

// Config configures a receiver.
type Config struct {
	// Addr is the listen address. Defaults to AddrDefault.
	Addr string
	// Endpoints are the webhook endpoints served. Required.
	Endpoints []provider.Endpoint
	// BodyLimit caps a delivery's size; larger ones get 413. An endpoint's
	// own body_limit wins. Defaults to BodyLimitDefault (1 MiB), and to
	// GitHubBodyLimitDefault for GitHub endpoints.
	BodyLimit int64
	// ReadTimeout bounds the time a client has to send a whole request,
	// headers and body. Defaults to ReadTimeoutDefault.
	ReadTimeout time.Duration
	// FirstByteTimeout bounds the wait for a body's first byte after the
	// headers; a client that announced a body and sends nothing is answered
	// 408 then. Defaults to FirstByteTimeoutDefault (at most ReadTimeout).
	FirstByteTimeout time.Duration
	// MaxConns caps open connections; before the cap, idle keep-alive
	// connections are closed. Defaults to MaxConnsDefault.
	MaxConns int
	// ConnsPerClient caps the connections one remote address may hold, so
	// one client cannot take every slot (slow headers, silent connections).
	// Behind a load balancer every connection comes from its address: set
	// it to MaxConns there. Defaults to a quarter of MaxConns.
	ConnsPerClient int
	// BodyBytes caps the bytes of bodies held at once, charged as they
	// arrive (a client that announces a body and sends nothing holds none)
	// and held until the delivery is answered. A request that finds no room
	// within a second is answered 503 and retried by the provider; memory
	// stays bounded however many clients send at once. Must be at least the
	// largest endpoint limit. Defaults to BodyBytesDefault (64 MiB).
	BodyBytes int64
	// CommitTimeout bounds the wait for the database; past it the answer is
	// 503 and the provider retries. Defaults to CommitTimeoutDefault, well
	// under the providers' deadlines (GitHub: 10 s).
	CommitTimeout time.Duration
	// Commit tunes group commit.
	Commit inbox.CommitterConfig
	// Registerer receives the metrics; Gatherer serves them on /metrics.
	// Default to a private registry.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	// Now is the clock used for signature tolerance. Defaults to time.Now.
	Now func() time.Time
}

// WithDefaults returns cfg with defaults filled in.
func (c Config) WithDefaults() Config {
	c.Addr = cmp.Or(c.Addr, AddrDefault)
	c.BodyLimit = cmp.Or(c.BodyLimit, BodyLimitDefault)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, ReadTimeoutDefault)
	c.MaxConns = cmp.Or(c.MaxConns, MaxConnsDefault)
	c.ConnsPerClient = cmp.Or(c.ConnsPerClient, max(c.MaxConns/4, 1))
	c.FirstByteTimeout = min(cmp.Or(c.FirstByteTimeout, FirstByteTimeoutDefault), c.ReadTimeout)
	c.BodyBytes = cmp.Or(c.BodyBytes, BodyBytesDefault)
	c.CommitTimeout = cmp.Or(c.CommitTimeout, CommitTimeoutDefault)
	if c.Registerer == nil {
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
	}
	if c.Gatherer == nil {
		c.Gatherer = prometheus.NewRegistry()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

type route struct {
	ep        *provider.Endpoint
	verifier  provider.Verifier
	bodyLimit int64
}

// bodyLimit is the endpoint's own limit, else the provider's, else the
// receiver's.
func bodyLimit(ep *provider.Endpoint, def int64) int64 {
	switch {
	case ep.BodyLimit > 0:
		return ep.BodyLimit
	case ep.Provider == provider.GitHub:
		return max(def, GitHubBodyLimitDefault)
	}
	return def
}

// Receiver serves webhook intake.
type Receiver struct {
	pool      *pgxpool.Pool
	log       *slog.Logger
	cfg       Config
	routes    map[string]route
	committer *inbox.Committer
	echo      *echo.Echo
	m         *metrics
	bodies    *semaphore.Weighted
}

// New validates the endpoints and builds the receiver. Stop releases it.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) (*Receiver, error) {
	cfg = cfg.WithDefaults()
	r := &Receiver{pool: pool, log: log.With(slog.String("service", "receiver")), cfg: cfg, routes: map[string]route{}}
	for i := range cfg.Endpoints {
		ep := &cfg.Endpoints[i]
		v, err := registry.Verifier(ep.Provider)
		if err != nil {
			return nil, fmt.Errorf("receiver config: endpoint %q: %w", ep.ID, err)
		}
		if _, dup := r.routes[ep.ID]; dup {
			return nil, fmt.Errorf("receiver config: endpoint %q defined twice", ep.ID)
		}
		rt := route{ep: ep, verifier: v, bodyLimit: bodyLimit(ep, cfg.BodyLimit)}
		if rt.bodyLimit > cfg.BodyBytes {
			return nil, fmt.Errorf("receiver config: endpoint %q: body limit %d exceeds receiver.body_bytes %d", ep.ID, rt.bodyLimit, cfg.BodyBytes)
		}
		r.routes[ep.ID] = rt
	}
	r.bodies = semaphore.NewWeighted(cfg.BodyBytes)
	r.m = newMetrics(cfg.Registerer)
	r.committer = inbox.NewCommitter(pool, r.log, cfg.Commit)
	e := health.NewEcho()
	// Wrapped once here, not passed as route middleware: echo would build
	// the middleware chain again on every request.
	e.POST("/webhooks/:endpoint_id", tracing.Echo("/webhooks/:endpoint_id")(r.handle))
	// The public port serves webhooks and probes only: metrics name endpoint
	// ids and traffic, and go to METRICS_ADDR like every service's.
	health.RegisterProbes(e, r.log, func(ctx context.Context) error { return pool.Ping(ctx) })
	r.echo = e
	return r, nil
}

// Handler is the receiver's HTTP handler.
func (r *Receiver) Handler() http.Handler { return r.echo }

// Run serves on cfg.Addr until ctx ends.
func (r *Receiver) Run(ctx context.Context) error {
	defer r.committer.Stop()
	return health.ServeWith(ctx, r.echo, r.cfg.Addr, r.log, r.serverConfig())
}

// ServeListener serves on ln, with the receiver's connection and time
// bounds, until ctx ends.
func (r *Receiver) ServeListener(ctx context.Context, ln net.Listener) error {
	return health.ServeListener(ctx, r.echo, ln, r.log, r.serverConfig())
}

func (r *Receiver) serverConfig() health.ServerConfig {
	return health.ServerConfig{ReadHeaderTimeout: r.cfg.ReadTimeout, ReadTimeout: r.cfg.ReadTimeout,
		WriteTimeout: r.cfg.ReadTimeout + r.cfg.CommitTimeout + 5*time.Second, MaxConns: r.cfg.MaxConns,
		ConnsPerClient: r.cfg.ConnsPerClient,
		OnClose:        func(reason string) { r.m.connsClosed.WithLabelValues(reason).Inc() }}
}

// Stop releases the commit workers (for callers that use Handler only).
func (r *Receiver) Stop() { r.committer.Stop() }

// Error codes in refusal bodies: {"error": {"code": ..., "message": ...}}.
const (
	CodeUnknownEndpoint   = "unknown_endpoint"
	CodeUnsupportedMedia  = "unsupported_media_type"
	CodeTooLarge          = "body_too_large"
	CodeInvalidSignature  = "invalid_signature"
	CodeStaleSignature    = "stale_signature"
	CodeMalformed         = "malformed_event"
	CodeScope             = "outside_endpoint_scope"
	CodeUnavailable       = "unavailable"
	CodeTimeout           = "request_timeout"
	CodeVersionFromFuture = "version_from_future"
)

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Kept bool `json:"kept,omitempty"`
}

func (r *Receiver) refuse(c echo.Context, status int, code, msg string) error {
	r.m.rejected.WithLabelValues(code).Inc()
	var b errorBody
	b.Error.Code, b.Error.Message = code, msg
	r.log.Info("delivery refused", slog.String("endpoint", logID(c.Param("endpoint_id"))), slog.String("code", code), slog.Int("status", status))
	return c.JSON(status, b)
}

// refuseUnread refuses a request whose body was not read, and closes its
// connection: otherwise the server would read up to 256 KiB of the body
// (waiting for it as long as the client likes) before it answered.
func (r *Receiver) refuseUnread(c echo.Context, status int, code, msg string) error {
	c.Response().Header().Set(echo.HeaderConnection, "close")
	return r.refuse(c, status, code, msg)
}

type acceptBody struct {
	Status  string `json:"status"`
	EventID string `json:"event_id"`
}

func (r *Receiver) handle(c echo.Context) error {
	start := time.Now()
	rt, ok := r.routes[c.Param("endpoint_id")]
	if !ok {
		return r.refuseUnread(c, http.StatusNotFound, CodeUnknownEndpoint, "no endpoint with that id")
	}
	req := c.Request()
	// The provider says which media types its deliveries come in (JSON
	// for all; GitHub's default is a form); its Verify reads each into the
	// JSON document that is stored.
	if mt, _, err := mime.ParseMediaType(req.Header.Get(echo.HeaderContentType)); err != nil || !provider.AcceptsMediaType(rt.verifier, mt) {
		return r.refuseUnread(c, http.StatusUnsupportedMediaType, CodeUnsupportedMedia, "content type is not one this endpoint's provider sends")
	}
	limit := rt.bodyLimit
	if req.ContentLength > limit {
		return r.refuseUnread(c, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("body exceeds %d bytes", limit))
	}
	// A request without the provider's authentication headers is refused
	// before a byte of its body is read.
	if hc, ok := rt.verifier.(provider.HeaderChecker); ok {
		if err := hc.CheckHeaders(rt.ep, req.Header); err != nil {
			return r.refuseUnread(c, http.StatusUnauthorized, CodeInvalidSignature, "signature or credentials do not verify")
		}
	}
	body, held, err := r.readBody(c, limit)
	// The body's share of the budget is held until the delivery is
	// answered: that is as long as its bytes are in memory.
	defer r.bodies.Release(held)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			return r.refuse(c, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("body exceeds %d bytes", limit))
		case errors.Is(err, os.ErrDeadlineExceeded):
			return r.refuseUnread(c, http.StatusRequestTimeout, CodeTimeout, "body not received within the read timeout")
		case errors.Is(err, errBusy):
			c.Response().Header().Set("Retry-After", "5")
			return r.refuseUnread(c, http.StatusServiceUnavailable, CodeUnavailable, "too many deliveries being read; retry later")
		}
		return r.refuse(c, http.StatusBadRequest, CodeMalformed, "could not read body")
	}
	ev, err := rt.verifier.Verify(rt.ep, req.Header, body, r.cfg.Now())
	if err == nil {
		err = storable(&ev)
	}
	rec := &inbox.Record{Endpoint: rt.ep, Event: ev}
	switch {
	case err == nil:
	case errors.Is(err, provider.ErrMalformed):
		// Authenticated but unreadable: keep it, dead, under an identity
		// derived from its bytes, so repeats stay one row.
		sum := sha256.Sum256(body)
		rec.Event = provider.Event{ID: "malformed-" + hex.EncodeToString(sum[:16]), Type: "malformed", Payload: body}
		rec.Malformed = err.Error()
		ctx, cancel := context.WithTimeout(req.Context(), r.cfg.CommitTimeout)
		defer cancel()
		if _, serr := r.committer.Submit(ctx, rec); serr != nil {
			return r.unavailable(c, serr)
		}
		r.m.rejected.WithLabelValues(CodeMalformed).Inc()
		var b errorBody
		b.Error.Code, b.Error.Message, b.Kept = CodeMalformed, err.Error(), true
		return c.JSON(http.StatusBadRequest, b)
	case errors.Is(err, provider.ErrVersionFromFuture):
		// Authenticated, under its own identity, but not to be applied:
		// kept dead so an operator can look at it and replay it if the
		// version turns out right.
		rec.Malformed, rec.DeadOutcome = err.Error(), inbox.OutcomeVersionFromFuture
		ctx, cancel := context.WithTimeout(req.Context(), r.cfg.CommitTimeout)
		defer cancel()
		if _, serr := r.committer.Submit(ctx, rec); serr != nil {
			return r.unavailable(c, serr)
		}
		r.m.rejected.WithLabelValues(CodeVersionFromFuture).Inc()
		var b errorBody
		b.Error.Code, b.Error.Message, b.Kept = CodeVersionFromFuture, err.Error(), true
		return c.JSON(http.StatusBadRequest, b)
	case errors.Is(err, provider.ErrStaleSignature):
		return r.refuse(c, http.StatusBadRequest, CodeStaleSignature, "signature timestamp outside tolerance")
	case errors.Is(err, provider.ErrScope):
		return r.refuse(c, http.StatusForbidden, CodeScope, "event belongs to another account or environment")
	default:
		return r.refuse(c, http.StatusUnauthorized, CodeInvalidSignature, "signature or credentials do not verify")
	}
	if span := trace.SpanFromContext(req.Context()); span.IsRecording() {
		span.SetAttributes(tracing.EventAttrs(rt.ep.Provider, rt.ep.SourceAccount, rt.ep.Environment, ev.ID, ev.ResourceType, ev.ResourceID)...)
	}
	if !rt.ep.Allows(ev.Type) {
		rec.Ignored = true
	}
	if rt.ep.StoreRaw {
		rec.Raw = body
	}
	ctx, cancel := context.WithTimeout(req.Context(), r.cfg.CommitTimeout)
	defer cancel()
	res, err := r.committer.Submit(ctx, rec)
	if err != nil {
		return r.unavailable(c, err)
	}
	if res == inbox.Kept {
		// The database refused the event's data: it is kept dead, with its
		// bytes, instead of being answered 503 on every redelivery.
		r.m.rejected.WithLabelValues(CodeMalformed).Inc()
		var b errorBody
		b.Error.Code, b.Error.Message, b.Kept = CodeMalformed, "the database refused the event's data; kept dead for inspection", true
		return c.JSON(http.StatusBadRequest, b)
	}
	r.m.results.WithLabelValues(res.String()).Inc()
	r.m.latency.Observe(time.Since(start).Seconds())
	return c.JSON(http.StatusOK, acceptBody{Status: res.String(), EventID: ev.ID})
}

var errBusy = errors.New("body budget exhausted")

// readBody reads the body within limit. Its bytes are charged to the
// receiver's body budget as they arrive, never before (the buffer grows by
// doubling, so at most twice what arrived is held): a client that
// announces a large body and sends nothing holds nothing but its
// connection, and that only until FirstByteTimeout. It returns what it
// charged; the caller releases it.
func (r *Receiver) readBody(c echo.Context, limit int64) ([]byte, int64, error) {
	req := c.Request()
	if req.ContentLength == 0 {
		return nil, 0, nil
	}
	start := time.Now()
	rc := http.NewResponseController(c.Response())
	// Errors only mean the connection cannot take deadlines (a test
	// recorder); the server's own read timeout still applies.
	_ = rc.SetReadDeadline(start.Add(r.cfg.FirstByteTimeout))
	src := http.MaxBytesReader(c.Response(), req.Body, limit)
	var buf []byte
	var held int64
	waiting := true
	for {
		if len(buf) == cap(buf) {
			// Room for limit+1 bytes lets the reader say when a body passes limit.
			grow := min(max(int64(cap(buf)), 512), limit+1-int64(cap(buf)))
			if err := r.charge(req.Context(), grow); err != nil {
				return nil, held, err
			}
			held += grow
			next := make([]byte, len(buf), int64(cap(buf))+grow)
			copy(next, buf)
			buf = next
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if n > 0 && waiting {
			waiting = false
			_ = rc.SetReadDeadline(start.Add(r.cfg.ReadTimeout))
		}
		switch {
		case err == io.EOF:
			return buf, held, nil
		case err != nil:
			return buf, held, err
		}
	}
}

// charge takes n bytes of the body budget, waiting at most a second.
func (r *Receiver) charge(ctx context.Context, n int64) error {
	if r.bodies.TryAcquire(n) {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, bodyBudgetWaitDefault)
	defer cancel()
	if err := r.bodies.Acquire(wait, n); err != nil {
		return errBusy
	}
	return nil
}

// logID is an endpoint id as a log line may carry it: anyone can put
// 60 KB in a URL.
func logID(id string) string { return inbox.SafeText(id, 64) }

// maxIdentityLen bounds the fields that name an event and its resource;
// Postgres indexes the ids, and a btree entry holds at most about 2.7 kB.
const maxIdentityLen = 512

// storable refuses, as malformed, an authenticated event whose identity
// Postgres cannot store (NUL, invalid UTF-8) or index (too long). Inserting it
// would fail the whole batch's statement, and answer 503 to it on every
// redelivery; as malformed it is kept dead instead.
func storable(ev *provider.Event) error {
	for _, f := range []struct{ name, v string }{
		{"event id", ev.ID}, {"event type", ev.Type}, {"resource type", ev.ResourceType}, {"resource id", ev.ResourceID},
	} {
		switch {
		case len(f.v) > maxIdentityLen:
			return fmt.Errorf("%w: %s longer than %d bytes", provider.ErrMalformed, f.name, maxIdentityLen)
		case !utf8.ValidString(f.v) || strings.ContainsRune(f.v, 0):
			return fmt.Errorf("%w: %s is not storable text", provider.ErrMalformed, f.name)
		}
	}
	return nil
}

func (r *Receiver) unavailable(c echo.Context, err error) error {
	r.log.Warn("commit failed; answering 503", slog.String("endpoint", logID(c.Param("endpoint_id"))), slog.String("error", err.Error()))
	c.Response().Header().Set("Retry-After", "5")
	return r.refuse(c, http.StatusServiceUnavailable, CodeUnavailable, "could not store the event; retry later")
}

type metrics struct {
	results     *prometheus.CounterVec
	rejected    *prometheus.CounterVec
	latency     prometheus.Histogram
	connsClosed *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_receiver_events_total",
			Help: "Deliveries stored or recognised, by result (accepted, duplicate, ignored)."}, []string{"result"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_receiver_rejected_total",
			Help: "Deliveries refused, by reason code."}, []string{"reason"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hookyard_receiver_accept_seconds",
			Help:    "Time from request to committed answer.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5}}),
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hookyard_receiver_connections_closed_total",
			Help: "Connections the receiver closed so that clients cannot hold them, by reason (per_client: the address held its share; idle_near_cap: idle while the connection cap neared)."}, []string{"reason"}),
	}
	reg.MustRegister(m.results, m.rejected, m.latency, m.connsClosed)
	return m
}
