package standardwebhooks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hookyard/hookyard/internal/apiguard"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Defaults of an endpoint's fetch API (provider.FetchAPI) and its client.
const (
	FetchRateDefault       = 10.0
	FetchHeaderDefault     = "Authorization"
	FetchStatusDefault     = "status"
	FetchDeletedDefault    = "deleted"
	fetchTimeout           = 5 * time.Second
	breakerFailures        = uint32(5)
	breakerOpenFor         = 10 * time.Second
	maxFetchBody           = 16 << 20
	placeholderID          = "{id}"
	placeholderType        = "{type}"
	fetchBreakerNamePrefix = "standardwebhooks fetch "
)

// Errors of a fetch. Returned errors wrap them; test with errors.Is.
var (
	// errStatus: the sender answered something else than 200.
	errStatus = errors.New("standardwebhooks fetch: unexpected status")
	// errNotSent: the breaker was open or the local rate limiter gave up
	// waiting; no request was sent.
	errNotSent = errors.New("standardwebhooks fetch: not sent")
)

// CheckFetch returns the problems of an endpoint's fetch settings that the
// config alone shows: a URL that is not absolute http(s) or has no {id},
// no token_env, a negative rate or burst. Whether the token is set and
// whether plain http may leave the host are judged at start (Connect) and
// by the production config check.
func CheckFetch(f *provider.FetchAPI) []error {
	var errs []error
	u, err := url.Parse(strings.NewReplacer(placeholderID, "x", placeholderType, "x").Replace(f.URL))
	switch {
	case f.URL == "":
		errs = append(errs, errors.New("fetch.url is required"))
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		errs = append(errs, errors.New("fetch.url must be an absolute http(s) URL"))
	case !strings.Contains(f.URL, placeholderID):
		errs = append(errs, errors.New("fetch.url must contain {id}: every resource is fetched at its own address"))
	}
	if f.TokenEnv == "" {
		errs = append(errs, errors.New("fetch.token_env is required: the environment variable of the sender's API token"))
	}
	if f.Rate < 0 || math.IsNaN(f.Rate) || math.IsInf(f.Rate, 0) {
		errs = append(errs, errors.New("fetch.rate must be a positive number of calls per second"))
	}
	if f.Burst < 0 {
		errs = append(errs, errors.New("fetch.burst must not be negative"))
	}
	if strings.ContainsAny(f.Header, " \t:\r\n") {
		errs = append(errs, errors.New("fetch.header must be a header name"))
	}
	return errs
}

// Connect implements provider.Connector: a fetcher for the endpoints that
// name a fetch API, one client (rate limiter and breaker) per token. It
// refuses a token_env that is unset, two endpoints of one account and
// environment with different fetch APIs (a resource would be read from
// either), and one token with two rates.
func (Provider) Connect(eps []provider.Endpoint, _ provider.APIOptions) (provider.Connection, error) {
	f := &Fetcher{targets: map[scope]target{}}
	clients := map[string]*fetchClient{}
	for i := range eps {
		ep := &eps[i]
		if ep.Provider != provider.StandardWebhooks || ep.Fetch == nil {
			continue
		}
		fc := *ep.Fetch
		if errs := CheckFetch(&fc); len(errs) > 0 {
			return nil, fmt.Errorf("endpoint %q: %w", ep.ID, errors.Join(errs...))
		}
		token := os.Getenv(fc.TokenEnv)
		if token == "" {
			return nil, fmt.Errorf("endpoint %q: fetch.token_env: %s is not set", ep.ID, fc.TokenEnv)
		}
		fc.Rate = cmp.Or(fc.Rate, FetchRateDefault)
		fc.Burst = cmp.Or(fc.Burst, max(1, int(math.Ceil(fc.Rate))))
		fc.Header = cmp.Or(fc.Header, FetchHeaderDefault)
		fc.Status = cmp.Or(fc.Status, FetchStatusDefault)
		fc.Deleted = cmp.Or(fc.Deleted, FetchDeletedDefault)
		cl, ok := clients[fc.TokenEnv]
		if !ok {
			cl = newFetchClient(fc.TokenEnv, token, fc.Rate, fc.Burst)
			clients[fc.TokenEnv] = cl
		} else if cl.rate != fc.Rate || cl.burst != fc.Burst {
			return nil, fmt.Errorf("endpoint %q: fetch.rate/burst: %s is shared with another endpoint at another rate; one token has one quota", ep.ID, fc.TokenEnv)
		}
		sc := scope{ep.SourceAccount, ep.Environment}
		if prev, ok := f.targets[sc]; ok && prev.cfg != fc {
			return nil, fmt.Errorf("endpoint %q: fetch: another endpoint of %s/%s fetches elsewhere; one account and environment has one API", ep.ID, sc.account, sc.environment)
		}
		f.targets[sc] = target{cfg: fc, client: cl}
	}
	return connection{f}, nil
}

// connection is the provider's Connection: a Fetcher when some endpoint
// has a fetch API, no reconciler source.
type connection struct{ f *Fetcher }

// Fetcher implements provider.Connection.
func (c connection) Fetcher() provider.Fetcher {
	if len(c.f.targets) == 0 {
		return nil
	}
	return c.f
}

// Source implements provider.Connection: nothing to reconcile.
func (connection) Source(*provider.Endpoint) (*provider.Source, error) { return nil, nil }

type scope struct{ account, environment string }

type target struct {
	cfg    provider.FetchAPI
	client *fetchClient
}

// Fetcher reads a resource's current state from its sender's fetch API,
// chosen by the resource's own account and environment, never another's.
//
// A 404 is returned as provider.ErrNotFound (retried, then dead): it is
// never a deletion. Only the configured deleted field, true in a 200
// answer, makes a tombstone. An answer whose state names another id is an
// error, never a write.
type Fetcher struct {
	targets map[scope]target
}

// Fetch implements provider.Fetcher.
func (f *Fetcher) Fetch(ctx context.Context, r message.Resource) (provider.Fetched, error) {
	t, ok := f.targets[scope{r.SourceAccount, r.Environment}]
	if !ok {
		return provider.Fetched{}, fmt.Errorf("fetch %s %s: no fetch API for %s/%s", r.Type, r.ID, r.SourceAccount, r.Environment)
	}
	u := strings.NewReplacer(placeholderID, url.PathEscape(r.ID), placeholderType, url.PathEscape(r.Type)).Replace(t.cfg.URL)
	body, err := t.client.get(ctx, t.cfg.Header, u)
	switch {
	case errors.Is(err, errNotSent):
		return provider.Fetched{}, fmt.Errorf("fetch %s %s: %w: %w", r.Type, r.ID, provider.ErrNotAttempted, err)
	case err != nil:
		var se *statusError
		if errors.As(err, &se) && se.status == http.StatusNotFound {
			return provider.Fetched{}, fmt.Errorf("fetch %s %s: %w: %w", r.Type, r.ID, provider.ErrNotFound, err)
		}
		return provider.Fetched{}, fmt.Errorf("fetch %s %s: %w", r.Type, r.ID, err)
	}
	return readFetched(t.cfg, r, body)
}

// readFetched takes the state, its status and its deletion out of a 200
// answer.
func readFetched(cfg provider.FetchAPI, r message.Resource, body []byte) (provider.Fetched, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return provider.Fetched{}, fmt.Errorf("fetch %s %s: unexpected response: %w", r.Type, r.ID, err)
	}
	state := doc
	if cfg.State != "" {
		var ok bool
		if state, ok = lookupObjects(doc, cfg.State); !ok {
			return provider.Fetched{}, fmt.Errorf("fetch %s %s: unexpected response: no state at %q", r.Type, r.ID, cfg.State)
		}
	}
	m, ok := state.(map[string]any)
	if !ok {
		return provider.Fetched{}, fmt.Errorf("fetch %s %s: unexpected response: the state is not an object", r.Type, r.ID)
	}
	// An answer about another resource must never be stored as this one.
	switch id := m["id"].(type) {
	case string:
		if id != r.ID {
			return provider.Fetched{}, fmt.Errorf("fetch %s %s: unexpected response: the state's id is another", r.Type, r.ID)
		}
	case json.Number:
		if id.String() != r.ID {
			return provider.Fetched{}, fmt.Errorf("fetch %s %s: unexpected response: the state's id is another", r.Type, r.ID)
		}
	}
	raw := body
	if cfg.State != "" {
		var err error
		if raw, err = json.Marshal(state); err != nil {
			return provider.Fetched{}, fmt.Errorf("fetch %s %s: %w", r.Type, r.ID, err)
		}
	}
	out := provider.Fetched{State: raw}
	if s, ok := lookupObjects(m, cfg.Status); ok {
		out.Status, _ = s.(string)
	}
	if d, ok := lookupObjects(m, cfg.Deleted); ok {
		out.Deleted, _ = d.(bool)
	}
	return out, nil
}

// fetchClient is one token's access to a sender's API: its rate limiter
// and its breaker (apiguard). It is safe for concurrent use.
type fetchClient struct {
	token string
	rate  float64
	burst int
	http  *http.Client
	guard *apiguard.Guard
	calls atomic.Int64
}

func newFetchClient(name, token string, perSecond float64, burst int) *fetchClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 64, 64
	return &fetchClient{token: token, rate: perSecond, burst: burst, http: &http.Client{Transport: tr},
		guard: apiguard.New(apiguard.Config{Name: fetchBreakerNamePrefix + name, RatePerSecond: perSecond, Burst: burst,
			BreakerFailures: breakerFailures, BreakerOpenFor: breakerOpenFor, Healthy: healthy})}
}

// get sends GET u through the limiter and the breaker.
func (c *fetchClient) get(ctx context.Context, header, u string) (body []byte, err error) {
	err = c.guard.Do(ctx, "standardwebhooks fetch", func() error {
		body, err = c.send(ctx, header, u)
		return err
	})
	if errors.Is(err, apiguard.ErrUnavailable) || errors.Is(err, apiguard.ErrLimited) {
		return nil, fmt.Errorf("%w: %w", errNotSent, err)
	}
	return body, err
}

// send makes one call. Its errors never carry the URL's query or the token.
func (c *fetchClient) send(ctx context.Context, header, u string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("standardwebhooks fetch: %w", err)
	}
	if http.CanonicalHeaderKey(header) == FetchHeaderDefault {
		req.Header.Set(header, "Bearer "+c.token)
	} else {
		req.Header.Set(header, c.token)
	}
	req.Header.Set("Accept", "application/json")
	c.calls.Add(1)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("standardwebhooks fetch: GET %s: %w", req.URL.Path, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFetchBody))
	if err != nil {
		return nil, fmt.Errorf("standardwebhooks fetch: GET %s: %w", req.URL.Path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	return nil, &statusError{path: req.URL.Path, status: resp.StatusCode, retryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

// unwrapURLError drops *url.Error's text, which repeats the whole URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// retryAfter reads a Retry-After header in either of its forms (RFC 9110
// 10.2.3): delay-seconds or an HTTP-date; 0 when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// statusError is a non-200 answer.
type statusError struct {
	path       string
	status     int
	retryAfter time.Duration
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: GET %s: %d", errStatus, e.path, e.status)
}

func (e *statusError) Unwrap() error { return errStatus }

// RetryAfter is how long the sender asked to wait (0: it did not say);
// the processor's retry honours it.
func (e *statusError) RetryAfter() time.Duration { return e.retryAfter }

// healthy tells the breaker whether an outcome says the sender is
// healthy: any answer below 500 but 429; not 5xx, 429, transport errors.
func healthy(err error) bool {
	if err == nil {
		return true
	}
	var se *statusError
	return errors.As(err, &se) && se.status < 500 && se.status != http.StatusTooManyRequests
}
