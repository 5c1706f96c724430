package stripe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/tracing"
)

// Defaults for APIConfig.
const (
	BaseURLDefault         = "https://api.stripe.com"
	TimeoutDefault         = 5 * time.Second
	RatePerSecondDefault   = 50.0
	BurstDefault           = 50
	BreakerFailuresDefault = uint32(5)
	BreakerOpenForDefault  = 10 * time.Second
)

// maxBody bounds the size of a response body read into memory.
const maxBody = 16 << 20

// APIConfig configures a Client.
type APIConfig struct {
	// BaseURL is the API root, without a trailing /v1. Defaults to
	// "https://api.stripe.com".
	BaseURL string
	// APIKey is the secret key sent as "Authorization: Bearer <key>".
	// Defaults to empty, which sends no Authorization header.
	APIKey string
	// Live is the mode of the data APIKey reads: every object the client
	// returns must carry "livemode" equal to it, or the call fails with
	// ErrLivemodeMismatch. It is the endpoint's environment
	// (provider.IsLive), so a live key configured on a test endpoint (or the
	// reverse) reads nothing into the wrong environment. Defaults to false
	// (test mode).
	Live bool
	// Timeout bounds each HTTP call, body included. Defaults to 5s.
	Timeout time.Duration
	// RatePerSecond is the steady rate of calls the client allows itself.
	// Defaults to 50.
	RatePerSecond float64
	// Burst is the token bucket's size. Defaults to 50.
	Burst int
	// BackgroundRate is the steady rate of calls made under a provider.Background
	// context (the reconciler's listings and events scans). They also take
	// tokens from the main bucket, so live fetches and background reads
	// share one quota per account, and the background never gets more than
	// this: live hints are not starved by a reconcile round. Defaults to a
	// fifth of RatePerSecond.
	BackgroundRate float64
	// BackgroundBurst is the background bucket's size. Defaults to a fifth
	// of Burst, at least 1.
	BackgroundBurst int
	// BreakerFailures is the number of consecutive failures that open the
	// breaker. Defaults to 5.
	BreakerFailures uint32
	// BreakerOpenFor is how long the breaker stays open before it lets one
	// trial call through. Defaults to 10s.
	BreakerOpenFor time.Duration
	// HTTPClient sends the requests. Defaults to a client whose transport
	// keeps up to 64 idle connections to the API, so concurrent partition
	// workers reuse connections instead of opening new ones.
	HTTPClient *http.Client
}

// WithDefaults returns cfg with every zero field set to its default.
func (cfg APIConfig) WithDefaults() APIConfig {
	cfg.BaseURL = strings.TrimRight(cmp.Or(cfg.BaseURL, BaseURLDefault), "/")
	cfg.Timeout = cmp.Or(cfg.Timeout, TimeoutDefault)
	cfg.RatePerSecond = cmp.Or(cfg.RatePerSecond, RatePerSecondDefault)
	cfg.Burst = cmp.Or(cfg.Burst, BurstDefault)
	cfg.BackgroundRate = cmp.Or(cfg.BackgroundRate, cfg.RatePerSecond/5)
	cfg.BackgroundBurst = cmp.Or(cfg.BackgroundBurst, max(1, cfg.Burst/5))
	cfg.BreakerFailures = cmp.Or(cfg.BreakerFailures, BreakerFailuresDefault)
	cfg.BreakerOpenFor = cmp.Or(cfg.BreakerOpenFor, BreakerOpenForDefault)
	if cfg.HTTPClient == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 64, 64
		cfg.HTTPClient = &http.Client{Transport: tr}
	}
	return cfg
}

// Sentinel errors. Returned errors wrap them with detail; test with errors.Is.
var (
	// ErrNotFound: Stripe answered 404, the resource does not exist (or not
	// in this account).
	ErrNotFound = errors.New("stripeapi: not found")
	// ErrUnauthorized: Stripe answered 401 or 403, the key is wrong or lacks
	// access to the account.
	ErrUnauthorized = errors.New("stripeapi: unauthorized")
	// ErrRateLimited: Stripe answered 429. Counts as a breaker failure.
	ErrRateLimited = errors.New("stripeapi: rate limited")
	// ErrServer: Stripe answered 5xx. Counts as a breaker failure.
	ErrServer = errors.New("stripeapi: server error")
	// ErrUnavailable: the breaker is open (or half-open and already trying a
	// call), so no request was sent.
	ErrUnavailable = errors.New("stripeapi: unavailable")
	// ErrLimited: the client's own rate limiter gave up waiting (the
	// caller's context ended first), so no request was sent.
	ErrLimited = errors.New("stripeapi: refused by the local rate limiter")
	// ErrUnsupported: the resource type has no known API path.
	ErrUnsupported = errors.New("stripeapi: unsupported resource type")
	// ErrLivemodeMismatch: Stripe returned an object whose livemode is not
	// APIConfig.Live, the credentials belong to the other environment. The
	// object is not returned. Never a breaker failure: Stripe is healthy,
	// the configuration is wrong.
	ErrLivemodeMismatch = errors.New("stripeapi: object of the other livemode")
)

// modes names APIConfig.Live in errors.
var modes = map[bool]string{false: "test", true: "live"}

// plurals maps resource types (Stripe's "object" names) to their
// collection path under /v1: GET /v1/<plural>/<id> retrieves one
// (https://docs.stripe.com/api/payment_intents/retrieve,
// https://docs.stripe.com/api/charges/retrieve,
// https://docs.stripe.com/api/prices/retrieve,
// https://docs.stripe.com/api/products/retrieve). Which of them the
// processor fetches is each endpoint's `project` (Interpret), not the
// client's; these are the types it may name.
var plurals = map[string]string{
	"subscription":   "subscriptions",
	"customer":       "customers",
	"invoice":        "invoices",
	"payment_intent": "payment_intents",
	"charge":         "charges",
	"price":          "prices",
	"product":        "products",
}

// Fetchable reports whether the client can retrieve resources of type t
// (GET /v1/<objects>/<id>): the types an endpoint may project.
func Fetchable(t string) bool {
	_, ok := plurals[t]
	return ok
}

// Client reads Stripe resources. It is safe for concurrent use.
type Client struct {
	cfg     APIConfig
	log     *slog.Logger
	limiter *rate.Limiter
	// background is the extra bucket of Background calls.
	background *rate.Limiter
	breaker    *gobreaker.CircuitBreaker[[]byte]
	calls      atomic.Int64
}

// New returns a Client for cfg (defaults applied). A nil log discards.
func NewClient(cfg APIConfig, log *slog.Logger) *Client {
	cfg = cfg.WithDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{
		cfg:        cfg,
		log:        log,
		limiter:    rate.NewLimiter(rate.Limit(cfg.RatePerSecond), cfg.Burst),
		background: rate.NewLimiter(rate.Limit(cfg.BackgroundRate), cfg.BackgroundBurst),
	}
	c.breaker = gobreaker.NewCircuitBreaker[[]byte](gobreaker.Settings{
		Name:    "stripeapi",
		Timeout: cfg.BreakerOpenFor,
		ReadyToTrip: func(n gobreaker.Counts) bool {
			return n.ConsecutiveFailures >= cfg.BreakerFailures
		},
		IsSuccessful: healthy,
		IsExcluded: func(err error) bool {
			var g *callerGone
			return errors.As(err, &g)
		},
		OnStateChange: func(name string, from, to gobreaker.State) {
			c.log.Warn("stripe api breaker", "from", from.String(), "to", to.String())
		},
	})
	return c
}

// Get fetches one resource and returns its raw JSON. account is the Connect
// account id sent as Stripe-Account, or "" for the platform account.
func (c *Client) Get(ctx context.Context, account, resourceType, id string) ([]byte, error) {
	plural, ok := plurals[resourceType]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnsupported, resourceType)
	}
	if id == "" {
		return nil, fmt.Errorf("stripeapi: get %s: empty id", resourceType)
	}
	path := "/v1/" + plural + "/" + url.PathEscape(id)
	body, err := c.do(ctx, account, path)
	if err != nil {
		return nil, err
	}
	var obj struct {
		Livemode *bool `json:"livemode"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil, fmt.Errorf("stripeapi: GET %s: decode: %w", path, err)
	}
	if err := c.checkMode(path, id, obj.Livemode); err != nil {
		return nil, err
	}
	return body, nil
}

// checkMode refuses an object of the other mode. An object without the
// field passes: Stripe's deleted objects ({"id", "object", "deleted"})
// carry none, and a Stripe-compatible server may leave it out.
func (c *Client) checkMode(path, id string, livemode *bool) error {
	if livemode != nil && *livemode != c.cfg.Live {
		return fmt.Errorf("%w: GET %s: %s has livemode=%t, the credentials are for %s mode",
			ErrLivemodeMismatch, path, id, *livemode, modes[c.cfg.Live])
	}
	return nil
}

// List reads one page of resourceType, in the API's order (newest first),
// after startingAfter ("" for the first page): each object's id and status
// (statuses[i] is ids[i]'s, "" when the object has none). It is ListObjects
// reduced to ids and statuses.
func (c *Client) List(ctx context.Context, account, resourceType, startingAfter string, limit int) (ids, statuses []string, hasMore bool, err error) {
	objs, hasMore, err := c.ListObjects(ctx, account, resourceType, startingAfter, limit)
	if err != nil {
		return nil, nil, false, err
	}
	ids, statuses = make([]string, len(objs)), make([]string, len(objs))
	for i, o := range objs {
		ids[i], statuses[i] = o.ID, o.Status
	}
	return ids, statuses, hasMore, nil
}

// ListObjects reads one page of resourceType, in the API's order (newest
// first), after startingAfter ("" for the first page). limit <= 0 leaves
// Stripe's default. Subscriptions are listed with status=all: without it
// Stripe leaves canceled ones out ("If no value is supplied, all
// subscriptions that have not been canceled are returned",
// https://docs.stripe.com/api/subscriptions/list), and a cancellation whose
// webhook was lost would never be found.
func (c *Client) ListObjects(ctx context.Context, account, resourceType, startingAfter string, limit int) ([]provider.Listed, bool, error) {
	plural, ok := plurals[resourceType]
	if !ok {
		return nil, false, fmt.Errorf("%w: %q", ErrUnsupported, resourceType)
	}
	q := url.Values{}
	if resourceType == "subscription" {
		q.Set("status", "all")
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if startingAfter != "" {
		q.Set("starting_after", startingAfter)
	}
	path := "/v1/" + plural
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	body, err := c.do(ctx, account, path)
	if err != nil {
		// An object deleted since (test-mode data, a deleted customer's
		// subscriptions) is no longer a cursor Stripe knows: 400
		// resource_missing (https://docs.stripe.com/api/pagination).
		if startingAfter != "" && ErrorCode(err) == "resource_missing" {
			return nil, false, fmt.Errorf("%w: %w", provider.ErrCursorGone, err)
		}
		return nil, false, err
	}
	var page struct {
		Data    []json.RawMessage `json:"data"`
		HasMore bool              `json:"has_more"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, false, fmt.Errorf("stripeapi: GET %s: decode list: %w", path, err)
	}
	out := make([]provider.Listed, 0, len(page.Data))
	for _, raw := range page.Data {
		var d struct {
			ID                string `json:"id"`
			Status            string `json:"status"`
			CancelAtPeriodEnd *bool  `json:"cancel_at_period_end"`
			Deleted           bool   `json:"deleted"`
			Livemode          *bool  `json:"livemode"`
		}
		if err := json.Unmarshal(raw, &d); err != nil || d.ID == "" {
			return nil, false, fmt.Errorf("stripeapi: GET %s: decode list item", path)
		}
		if err := c.checkMode(path, d.ID, d.Livemode); err != nil {
			return nil, false, err
		}
		// A listed object is the document GET /v1/<objects>/{id} returns
		// (https://docs.stripe.com/api/subscriptions/list: "a dictionary
		// with a data property that contains an array of ... subscriptions"),
		// the same the Fetcher stores.
		out = append(out, provider.Listed{ID: d.ID, Status: d.Status, CancelAtPeriodEnd: d.CancelAtPeriodEnd, Deleted: d.Deleted, State: raw})
	}
	return out, page.HasMore, nil
}

// Live is the mode of the data the client's key reads (APIConfig.Live).
func (c *Client) Live() bool { return c.cfg.Live }

// Calls reports how many HTTP requests the client has sent.
func (c *Client) Calls() int64 { return c.calls.Load() }

// BreakerState is "closed", "half-open" or "open".
func (c *Client) BreakerState() string { return c.breaker.State().String() }

// do sends GET path through the rate limiter and the breaker.
func (c *Client) do(ctx context.Context, account, path string) (body []byte, err error) {
	// The span covers the wait for the limiter and the breaker too: a slow
	// fetch is as often our own rate limit as Stripe's latency.
	ctx, span := tracing.Start(ctx, "stripe GET", trace.WithSpanKind(trace.SpanKindClient))
	defer func() { tracing.End(span, err) }()
	if span.IsRecording() {
		span.SetAttributes(attribute.String("http.request.method", http.MethodGet), attribute.String("url.path", strings.SplitN(path, "?", 2)[0]),
			attribute.String("hookyard.stripe_account", account))
	}
	if c.breaker.State() == gobreaker.StateOpen {
		return nil, fmt.Errorf("%w: GET %s: %w", ErrUnavailable, path, gobreaker.ErrOpenState)
	}
	if provider.IsBackground(ctx) {
		if err := c.background.Wait(ctx); err != nil {
			return nil, fmt.Errorf("%w: GET %s: %w", ErrLimited, path, err)
		}
	}
	if err := c.limiter.Wait(ctx); err != nil {
		return nil, fmt.Errorf("%w: GET %s: %w", ErrLimited, path, err)
	}
	body, err = c.breaker.Execute(func() ([]byte, error) {
		body, err := c.send(ctx, account, path)
		if err != nil && ctx.Err() != nil {
			// The caller gave up: says nothing about Stripe's health.
			return nil, &callerGone{err}
		}
		return body, err
	})
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, fmt.Errorf("%w: GET %s: %w", ErrUnavailable, path, err)
	}
	return body, err
}

// send makes one HTTP call bounded by APIConfig.Timeout.
func (c *Client) send(ctx context.Context, account, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.BaseURL+path, nil)
	if err != nil {
		return nil, fmt.Errorf("stripeapi: GET %s: %w", path, err)
	}
	if c.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.APIKey)
	}
	if account != "" {
		req.Header.Set("Stripe-Account", account)
	}
	req.Header.Set("Accept", "application/json")
	c.calls.Add(1)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, transportErr(ctx, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, transportErr(ctx, path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	e := statusErr(path, resp.StatusCode, body)
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.retryAfter = time.Duration(s) * time.Second
	}
	return nil, e
}

// transportErr wraps a network error, keeping a timeout checkable with
// errors.Is(err, context.DeadlineExceeded) even when the transport hides it.
func transportErr(ctx context.Context, path string, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("stripeapi: GET %s: %w: %w", path, cerr, err)
	}
	return fmt.Errorf("stripeapi: GET %s: %w", path, err)
}

// statusError is a non-200 answer. It unwraps to its sentinel, if any.
type statusError struct {
	path     string
	status   int
	code     string
	message  string
	sentinel error
	// retryAfter is the answer's Retry-After in seconds (RFC 9110); Stripe
	// documents none, other Stripe-compatible servers may send one.
	retryAfter time.Duration
}

// RetryAfter is how long the server asked the caller to wait (0: it did
// not say). Callers find it with errors.As.
func (e *statusError) RetryAfter() time.Duration { return e.retryAfter }

func (e *statusError) Error() string {
	var b strings.Builder
	if e.sentinel != nil {
		b.WriteString(e.sentinel.Error())
		b.WriteString(": ")
	} else {
		b.WriteString("stripeapi: ")
	}
	fmt.Fprintf(&b, "GET %s: %d", e.path, e.status)
	if e.code != "" {
		b.WriteString(" " + e.code)
	}
	if e.message != "" {
		b.WriteString(": " + e.message)
	}
	return b.String()
}

func (e *statusError) Unwrap() error { return e.sentinel }

// ErrorCode is the code of Stripe's error answer in err ("resource_missing",
// "rate_limit", ...), "" when err holds none.
func ErrorCode(err error) string {
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	return ""
}

func statusErr(path string, status int, body []byte) *statusError {
	e := &statusError{path: path, status: status}
	var se struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &se) == nil {
		e.code, e.message = se.Error.Code, se.Error.Message
	}
	switch {
	case status == http.StatusNotFound:
		e.sentinel = ErrNotFound
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.sentinel = ErrUnauthorized
	case status == http.StatusTooManyRequests:
		e.sentinel = ErrRateLimited
	case status >= 500:
		e.sentinel = ErrServer
	}
	return e
}

// healthy tells the breaker whether a call's outcome says Stripe is healthy:
// any answer below 500 other than 429 does; 5xx, 429 and transport errors
// do not.
func healthy(err error) bool {
	if err == nil {
		return true
	}
	var se *statusError
	return errors.As(err, &se) && se.status < 500 && se.status != http.StatusTooManyRequests
}

// callerGone marks an error caused by the caller's context ending, which the
// breaker ignores.
type callerGone struct{ err error }

func (g *callerGone) Error() string { return g.err.Error() }
func (g *callerGone) Unwrap() error { return g.err }

// FetchableTypes are the types Fetchable accepts, sorted.
func FetchableTypes() []string {
	out := make([]string, 0, len(plurals))
	for t := range plurals {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
