package github

import (
	"cmp"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hookyard/hookyard/internal/apiguard"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Defaults of APIConfig.
const (
	APIBaseDefault = "https://api.github.com"
	// RatePerSecondDefault keeps the reconciler well below GitHub's 5,000
	// requests per hour per token (about 1.4/s,
	// https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api).
	RatePerSecondDefault = 0.5
	BurstDefault         = 5
	APITimeoutDefault    = 10 * time.Second
	// APIVersion is sent as X-GitHub-Api-Version.
	APIVersion = "2022-11-28"
)

// Sentinel errors of the API client.
var (
	// ErrRateLimited: GitHub answered 429, or 403 with its rate limit spent.
	ErrRateLimited = errors.New("github api: rate limited")
	// ErrServer: GitHub answered 5xx.
	ErrServer = errors.New("github api: server error")
	// ErrUnauthorized: 401 or 403 (bad token, missing admin:repo_hook).
	ErrUnauthorized = errors.New("github api: unauthorized")
	// ErrNotFound: the hook or delivery does not exist (or the token may not see it).
	ErrNotFound = errors.New("github api: not found")
	// ErrUnprocessable: 422 Validation Failed, e.g. a redelivery of a
	// delivery older than GitHub redelivers, or a listing cursor it no
	// longer knows.
	ErrUnprocessable = errors.New("github api: unprocessable")
)

// Hook names one configured webhook whose deliveries can be listed and
// redelivered (the endpoint's github_hook).
type Hook = provider.GitHubHook

// AppHookPath is a GitHub App's deliveries collection
// (https://docs.github.com/en/rest/apps/webhooks#list-deliveries-for-an-app-webhook).
const AppHookPath = "/app/hook/deliveries"

// HookPath is the hook's deliveries collection under the API root.
func HookPath(h Hook) (string, error) {
	switch {
	case h.AppID != "":
		if h.Repo != "" || h.Org != "" || h.HookID != 0 || h.Token != "" {
			return "", errors.New("github hook: an App's hook is named by app_id and private_key only, not repo, org, hook_id or token")
		}
		if h.PrivateKey == "" {
			return "", errors.New("github hook: app_id needs the App's private_key")
		}
		return AppHookPath, nil
	case h.PrivateKey != "":
		return "", errors.New("github hook: private_key needs app_id")
	case h.HookID <= 0:
		return "", errors.New("github hook: hook_id is required")
	case h.Repo != "" && h.Org != "":
		return "", errors.New("github hook: name repo or org, not both")
	case h.Repo != "":
		owner, name, ok := strings.Cut(h.Repo, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			return "", fmt.Errorf("github hook: repo %q is not owner/name", h.Repo)
		}
		return fmt.Sprintf("/repos/%s/%s/hooks/%d/deliveries", url.PathEscape(owner), url.PathEscape(name), h.HookID), nil
	case h.Org != "":
		return fmt.Sprintf("/orgs/%s/hooks/%d/deliveries", url.PathEscape(h.Org), h.HookID), nil
	}
	return "", errors.New("github hook: repo or org is required")
}

// APIConfig configures a Client.
type APIConfig struct {
	// BaseURL is the API root. Defaults to APIBaseDefault.
	BaseURL string
	// Timeout bounds each call. Defaults to APITimeoutDefault.
	Timeout time.Duration
	// RatePerSecond and Burst are the token's quota for this client.
	// Default to RatePerSecondDefault and BurstDefault.
	RatePerSecond float64
	Burst         int
	// HTTPClient defaults to http.DefaultClient.
	HTTPClient *http.Client
}

// Delivery is one delivery attempt as GitHub lists it
// (https://docs.github.com/en/rest/repos/webhooks#list-deliveries-for-a-repository-webhook).
type Delivery struct {
	ID          int64     `json:"id"`
	GUID        string    `json:"guid"`
	DeliveredAt time.Time `json:"delivered_at"`
	Redelivery  bool      `json:"redelivery"`
	Duration    float64   `json:"duration"`
	Status      string    `json:"status"`
	StatusCode  int       `json:"status_code"`
	Event       string    `json:"event"`
	Action      *string   `json:"action"`
}

// Client lists a hook's deliveries and asks for redeliveries. Safe for
// concurrent use.
type Client struct {
	cfg   APIConfig
	hook  Hook
	path  string
	guard *apiguard.Guard
	log   *slog.Logger
	// appKey signs the App's tokens (nil for a repository or org hook).
	appKey *rsa.PrivateKey
}

// NewClient returns a client of hook.
func NewClient(cfg APIConfig, hook Hook, log *slog.Logger) (*Client, error) {
	path, err := HookPath(hook)
	if err != nil {
		return nil, err
	}
	cfg.BaseURL = strings.TrimRight(cmp.Or(cfg.BaseURL, APIBaseDefault), "/")
	cfg.Timeout = cmp.Or(cfg.Timeout, APITimeoutDefault)
	cfg.RatePerSecond = cmp.Or(cfg.RatePerSecond, RatePerSecondDefault)
	cfg.Burst = cmp.Or(cfg.Burst, BurstDefault)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := apiguard.New(apiguard.Config{Name: "github " + path, RatePerSecond: cfg.RatePerSecond, Burst: cfg.Burst,
		Healthy: func(err error) bool {
			return err == nil || !(errors.Is(err, ErrServer) || errors.Is(err, ErrRateLimited) || !isStatus(err))
		}})
	c := &Client{cfg: cfg, hook: hook, path: path, guard: g, log: log}
	if hook.AppID != "" {
		if c.appKey, err = ParseAppKey(hook.PrivateKey); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// nextCursor finds the cursor of rel="next" in a Link header: GitHub pages
// deliveries by cursor only (https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api).
var nextLink = regexp.MustCompile(`<([^>]+)>;\s*rel="next"`)

// ListDeliveries returns one page of deliveries, newest first, and the
// cursor of the next page ("" after the last).
func (c *Client) ListDeliveries(ctx context.Context, cursor string, perPage int) ([]Delivery, string, error) {
	q := url.Values{}
	if perPage > 0 {
		q.Set("per_page", strconv.Itoa(min(perPage, 100)))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	p := c.path
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var out []Delivery
	var next string
	err := c.guard.Do(ctx, "GET "+p, func() error {
		body, h, err := c.send(ctx, http.MethodGet, p, http.StatusOK)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(body, &out); err != nil {
			return fmt.Errorf("github api: GET %s: decode: %w", p, err)
		}
		if m := nextLink.FindStringSubmatch(h.Get("Link")); m != nil {
			if u, err := url.Parse(m[1]); err == nil {
				next = u.Query().Get("cursor")
			}
		}
		return nil
	})
	return out, next, err
}

// Redeliver asks GitHub to send delivery id again
// (https://docs.github.com/en/rest/repos/webhooks#redeliver-a-delivery-for-a-repository-webhook):
// 202, delivered later, under the same X-GitHub-Delivery guid.
func (c *Client) Redeliver(ctx context.Context, id int64) error {
	p := c.path + "/" + strconv.FormatInt(id, 10) + "/attempts"
	return c.guard.Do(ctx, "POST "+p, func() error {
		_, _, err := c.send(ctx, http.MethodPost, p, http.StatusAccepted)
		return err
	})
}

type statusError struct {
	method, path string
	status       int
	sentinel     error
	// message is GitHub's own "message" (and first error's), which says
	// why a 422 refused the request.
	message string
	// retryAfter is how long GitHub asked to wait: its Retry-After, else
	// the time until x-ratelimit-reset when the limit is spent
	// (https://docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api#handle-rate-limit-errors-appropriately).
	retryAfter time.Duration
}

// RetryAfter is how long GitHub asked to wait (0: it did not say); the
// processor's retry honours it.
func (e *statusError) RetryAfter() time.Duration { return e.retryAfter }

// retryAfter reads a rate-limited answer's wait: retry-after in seconds,
// else x-ratelimit-reset (epoch seconds) when x-ratelimit-remaining is 0.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if r, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			if d := time.Unix(r, 0).Sub(now); d > 0 {
				return d
			}
		}
	}
	return 0
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("github api: %s %s: %d", e.method, e.path, e.status)
	if e.message != "" {
		s += " " + e.message
	}
	if e.sentinel != nil {
		s = e.sentinel.Error() + ": " + s
	}
	return s
}
func (e *statusError) Unwrap() error { return e.sentinel }

func isStatus(err error) bool {
	var se *statusError
	return errors.As(err, &se)
}

// statusOf is the HTTP status of a call's error, 0 when GitHub gave none.
func statusOf(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	return 0
}

func (c *Client) send(ctx context.Context, method, path string, want int) ([]byte, http.Header, error) {
	token := c.hook.Token
	if c.appKey != nil {
		var err error
		if token, err = AppJWT(c.appKey, c.hook.AppID, time.Now()); err != nil {
			return nil, nil, err
		}
	}
	return request(ctx, c.cfg, method, path, token, want)
}

// request sends one call authenticated with token ("" for none) and reads
// its answer: the body when the status is want, else a *statusError. The
// token is only ever put in the Authorization header, never in an error.
func request(ctx context.Context, cfg APIConfig, method, path, token string, want int) ([]byte, http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, cfg.BaseURL+path, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("github api: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", APIVersion)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("github api: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("github api: %s %s: %w", method, path, err)
	}
	if resp.StatusCode == want {
		return body, resp.Header, nil
	}
	e := &statusError{method: method, path: path, status: resp.StatusCode, message: errorMessage(body)}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode == http.StatusForbidden && resp.Header.Get("X-RateLimit-Remaining") == "0":
		e.sentinel = ErrRateLimited
		e.retryAfter = retryAfter(resp.Header, time.Now())
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e.sentinel = ErrUnauthorized
	case resp.StatusCode == http.StatusNotFound:
		e.sentinel = ErrNotFound
	case resp.StatusCode == http.StatusUnprocessableEntity:
		e.sentinel = ErrUnprocessable
	case resp.StatusCode >= 500:
		e.sentinel = ErrServer
	}
	return nil, nil, e
}

// errorMessage reads GitHub's error document
// (https://docs.github.com/en/rest/using-the-rest-api/troubleshooting-the-rest-api):
// its message and its first error's, bounded; "" when the body is not one.
func errorMessage(body []byte) string {
	var doc struct {
		Message string `json:"message"`
		Errors  []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Message == "" {
		return ""
	}
	m := doc.Message
	if len(doc.Errors) > 0 && doc.Errors[0].Message != "" {
		m += ": " + doc.Errors[0].Message
	}
	return fmt.Sprintf("%.200q", m)
}
