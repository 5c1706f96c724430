package chargebee

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
	"strconv"
	"strings"
	"time"

	"github.com/hookyard/hookyard/internal/apiguard"
)

// Defaults of APIConfig.
const (
	// RatePerSecondDefault keeps the reconciler below Chargebee's smallest
	// documented limit (a test site: 150 calls per minute,
	// https://apidocs.chargebee.com/docs/api/error-handling#api-rate-limits).
	RatePerSecondDefault = 1.0
	BurstDefault         = 5
	APITimeoutDefault    = 10 * time.Second
)

// Sentinel errors of the API client.
var (
	// ErrRateLimited: Chargebee answered 429.
	ErrRateLimited = errors.New("chargebee api: rate limited")
	// ErrServer: Chargebee answered 5xx.
	ErrServer = errors.New("chargebee api: server error")
	// ErrUnauthorized: 401 or 403 (wrong API key, or a key of another site).
	ErrUnauthorized = errors.New("chargebee api: unauthorized")
)

// APIConfig configures a Client.
type APIConfig struct {
	// Site is the site's base URL, e.g. https://acme-test.chargebee.com.
	// Required.
	Site string
	// APIKey is sent as the Basic auth user name, with an empty password,
	// as Chargebee expects (https://apidocs.chargebee.com/docs/api/auth).
	APIKey string
	// Timeout bounds each call. Defaults to APITimeoutDefault.
	Timeout time.Duration
	// RatePerSecond and Burst are this site's quota for the client.
	// Default to RatePerSecondDefault and BurstDefault.
	RatePerSecond float64
	Burst         int
	// HTTPClient defaults to http.DefaultClient.
	HTTPClient *http.Client
}

// ListedEvent is one event of GET /api/v2/events.
type ListedEvent struct {
	ID         string
	OccurredAt time.Time
	// Body is the event object: the same document a webhook delivers.
	Body json.RawMessage
}

// Client reads a site's events. Safe for concurrent use.
type Client struct {
	cfg   APIConfig
	guard *apiguard.Guard
	log   *slog.Logger
}

// NewClient returns a client of cfg.Site.
func NewClient(cfg APIConfig, log *slog.Logger) (*Client, error) {
	if cfg.Site == "" || cfg.APIKey == "" {
		return nil, errors.New("chargebee api: site and api_key are required")
	}
	cfg.Site = strings.TrimRight(cfg.Site, "/")
	cfg.Timeout = cmp.Or(cfg.Timeout, APITimeoutDefault)
	cfg.RatePerSecond = cmp.Or(cfg.RatePerSecond, RatePerSecondDefault)
	cfg.Burst = cmp.Or(cfg.Burst, BurstDefault)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := apiguard.New(apiguard.Config{Name: "chargebee " + cfg.Site, RatePerSecond: cfg.RatePerSecond, Burst: cfg.Burst,
		Healthy: func(err error) bool {
			var se *statusError
			return err == nil || errors.As(err, &se) && se.status < 500 && se.status != http.StatusTooManyRequests
		}})
	return &Client{cfg: cfg, guard: g, log: log}, nil
}

// ListEvents reads one page of GET /api/v2/events
// (https://apidocs.chargebee.com/docs/api/events#list_events): events that
// occurred after after (Chargebee's occurred_at[after] is exclusive, in
// seconds), oldest first (sort_by[asc]=occurred_at), continuing at offset
// ("" first: the next_offset of the previous page, passed back as is). It
// returns the page and its next_offset ("" after the last page).
func (c *Client) ListEvents(ctx context.Context, after time.Time, offset string, limit int) ([]ListedEvent, string, error) {
	q := url.Values{}
	if !after.IsZero() {
		q.Set("occurred_at[after]", strconv.FormatInt(after.Unix(), 10))
	}
	q.Set("sort_by[asc]", "occurred_at")
	if limit > 0 {
		q.Set("limit", strconv.Itoa(min(limit, 100)))
	}
	if offset != "" {
		q.Set("offset", offset)
	}
	path := "/api/v2/events?" + q.Encode()
	var out []ListedEvent
	var next string
	err := c.guard.Do(ctx, "GET "+path, func() error {
		body, err := c.get(ctx, path)
		if err != nil {
			return err
		}
		var page struct {
			List []struct {
				Event json.RawMessage `json:"event"`
			} `json:"list"`
			NextOffset string `json:"next_offset"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return fmt.Errorf("chargebee api: GET %s: decode: %w", path, err)
		}
		for _, it := range page.List {
			var ev struct {
				ID         string `json:"id"`
				OccurredAt int64  `json:"occurred_at"`
			}
			if err := json.Unmarshal(it.Event, &ev); err != nil {
				return fmt.Errorf("chargebee api: GET %s: decode event: %w", path, err)
			}
			out = append(out, ListedEvent{ID: ev.ID, OccurredAt: time.Unix(ev.OccurredAt, 0).UTC(), Body: it.Event})
		}
		next = page.NextOffset
		return nil
	})
	return out, next, err
}

type statusError struct {
	path     string
	status   int
	sentinel error
	// param and code are Chargebee's error document's param and
	// api_error_code (https://apidocs.chargebee.com/docs/api/error-handling).
	param, code string
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("chargebee api: GET %s: %d", e.path, e.status)
	if e.code != "" {
		s += fmt.Sprintf(" %.64s (param %.64q)", e.code, e.param)
	}
	if e.sentinel != nil {
		s = e.sentinel.Error() + ": " + s
	}
	return s
}
func (e *statusError) Unwrap() error { return e.sentinel }

func (c *Client) get(ctx context.Context, path string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.Site+path, nil)
	if err != nil {
		return nil, fmt.Errorf("chargebee api: GET %s: %w", path, err)
	}
	req.SetBasicAuth(c.cfg.APIKey, "")
	req.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("chargebee api: GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("chargebee api: GET %s: %w", path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return body, nil
	}
	e := &statusError{path: path, status: resp.StatusCode}
	var doc struct {
		Param string `json:"param"`
		Code  string `json:"api_error_code"`
	}
	if json.Unmarshal(body, &doc) == nil {
		e.param, e.code = doc.Param, doc.Code
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		e.sentinel = ErrRateLimited
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		e.sentinel = ErrUnauthorized
	case resp.StatusCode >= 500:
		e.sentinel = ErrServer
	}
	return nil, e
}

// BadParam reports the parameter Chargebee refused with a 400 (its error
// document's param), or "" for any other error.
func BadParam(err error) string {
	var se *statusError
	if errors.As(err, &se) && se.status == http.StatusBadRequest {
		return se.param
	}
	return ""
}
