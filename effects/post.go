package effects

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/subscriber"
)

// Body is the JSON document an effect POSTs. Every attempt of an action
// POSTs the same bytes (see encodeBody): a standard idempotent server
// answers a key reused with another body 422, never with the stored answer.
type Body struct {
	// ActionKey is the stable key, also sent as Idempotency-Key.
	ActionKey string    `json:"action_key"`
	Kind      string    `json:"kind"`
	Fact      fact.Fact `json:"fact"`
}

// AttemptHeader carries the attempt's number (1 for the first, counting
// replays); it is the one part of a request that changes between attempts,
// so it stays out of the body.
const AttemptHeader = "Hookyard-Attempt"

// encodeBody builds c's body from what is stored for it, the action's key
// and its fact, and nothing of the attempt: the same action always encodes
// to the same bytes (struct fields in declaration order, the fact's data as
// Postgres stores it, recorded_at in UTC so that senders in other time zones
// agree).
//
// A transition's effect has no fact: its body was stored with the action
// when it was recorded (action.TransitionRecord) and is sent as stored.
func encodeBody(c action.Claimed) ([]byte, error) {
	if c.Body != nil {
		return c.Body, nil
	}
	f := *c.Fact
	f.RecordedAt = f.RecordedAt.UTC()
	return json.Marshal(Body{ActionKey: c.Key.String(), Kind: c.Key.Kind, Fact: f})
}

// outcome is what one attempt came to.
type outcome struct {
	// status is sent, failed, ambiguous or dead.
	status string
	// err is the reason of anything but sent, for last_error. It never
	// holds the response body (it is the receiving server's data).
	err string
	// retryAfter is the server's Retry-After on a 429 or 503.
	retryAfter time.Duration
}

// maxDrain caps the response bytes read (so the connection can be reused).
const maxDrain = 64 << 10

// post makes one attempt: the action's body POSTed with its stable key as
// Idempotency-Key. Only a 2xx is sent (a server's stored answer replayed
// for a completed key included). A 409 is ambiguous: it says the request
// with this key is still in progress, not how it ends, so it is retried
// with the same key (dead only if it names another key). 408, 429 and 5xx
// are failed and retried; 422 (the key reused with another body) and any
// other answer (4xx, or a redirect: a misconfigured URL) are dead. A
// transport error is ambiguous once the request may have reached the server
// (its headers were written), else failed: either way it is retried with
// the same key.
func (s *Sender) post(ctx context.Context, target string, c action.Claimed) outcome {
	key := c.Key.String()
	body, err := encodeBody(c)
	if err != nil {
		return outcome{status: action.StatusDead, err: fmt.Sprintf("encode body: %v", err)}
	}
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return outcome{status: action.StatusDead, err: fmt.Sprintf("build request: %v", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set(AttemptHeader, strconv.Itoa(c.Attempts))
	req.Header.Set("User-Agent", "hookyard-effects")
	if secret, ok := s.secrets[c.Key.Kind]; ok {
		// A subscriber's delivery: Standard Webhooks headers. webhook-id is
		// the stable key, the same on every attempt, and the body is the
		// same bytes; the timestamp is this attempt's and the signature is
		// made again over it, as Svix does, so a retry hours later is not
		// refused by the receiver's 5-minute tolerance. A receiver
		// deduplicates by webhook-id.
		h, err := subscriber.Sign(secret, key, time.Now(), body)
		if err != nil {
			return outcome{status: action.StatusDead, err: fmt.Sprintf("sign: %v", err)}
		}
		for k, v := range h {
			req.Header[k] = v
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if wrote.Load() {
			return outcome{status: action.StatusAmbiguous, err: fmt.Sprintf("attempt %d: %v (the request may have arrived)", c.Attempts, err)}
		}
		return outcome{status: action.StatusFailed, err: fmt.Sprintf("attempt %d: %v (not sent)", c.Attempts, err)}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	code := resp.StatusCode
	detail := fmt.Sprintf("attempt %d: HTTP %d", c.Attempts, code)
	switch {
	case code >= 200 && code < 300:
		return outcome{status: action.StatusSent}
	case code == http.StatusConflict:
		if got := resp.Header.Get("Idempotency-Key"); got != "" && got != key {
			return outcome{status: action.StatusDead, err: fmt.Sprintf("%s for another Idempotency-Key (%q)", detail, got)}
		}
		// draft-ietf-httpapi-idempotency-key-header, section 2.6: 409 while
		// the original request is being processed; Stripe's
		// idempotency_key_in_use. That request may still fail, and then
		// only a later attempt produces the receipt.
		return outcome{status: action.StatusAmbiguous, err: detail + " (a request with this key is still in progress; retried with the same key)",
			retryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	case code == http.StatusUnprocessableEntity:
		return outcome{status: action.StatusDead, err: detail + " (the server holds this key with another body)"}
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		return outcome{status: action.StatusFailed, err: detail, retryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	case code >= 300 && code < 400:
		return outcome{status: action.StatusDead, err: detail + " (a redirect: configure the final URL)"}
	default:
		return outcome{status: action.StatusDead, err: detail}
	}
}

// retryAfter reads a Retry-After of seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
