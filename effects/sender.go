package effects

import (
	"cmp"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/subscriber"
	"github.com/hookyard/hookyard/pkg/tracing"
)

// Defaults of Config.
const (
	TimeoutDefault      = 10 * time.Second
	LeaseMarginDefault  = 30 * time.Second
	BatchSizeDefault    = 16
	PollIntervalDefault = time.Second
	BackoffBaseDefault  = 2 * time.Second
	BackoffMaxDefault   = time.Hour
	// MaxAttemptsDefault: with the default backoff, about nine hours of
	// retries before an action is dead.
	MaxAttemptsDefault = 20
	// SettleTimeout bounds the write of one outcome, also while stopping.
	SettleTimeout = 5 * time.Second
)

// ReasonNoURL says why receipts stay pending when no URL is configured.
const ReasonNoURL = "no receipt_url configured (effects.receipt_url or RECEIPT_WEBHOOK_URL): receipts stay pending"

// Config configures a Sender.
type Config struct {
	// ReceiptURL is where receipts are POSTed (http or https), when the
	// receipt's declaration names no URL. Defaults to none: receipts are
	// not claimed and stay pending.
	ReceiptURL string
	// Effects are the declared effects (action.Effect): each kind with a
	// URL is claimed and sent; a kind without one stays pending. Defaults
	// to action.DefaultEffects (the receipt, on invoice_paid facts); a
	// declared kind replaces the default of that kind.
	Effects action.Effects
	// Subscribers are the changes topic's internal subscribers (package
	// subscriber): each one's deliveries (kind "change:<name>") are claimed
	// in order per resource (action.ClaimOrdered) and POSTed with Standard
	// Webhooks headers signed with its key. Defaults to none.
	Subscribers subscriber.Subscribers
	// Timeout bounds one attempt, from its claim to the end of the
	// response. Defaults to TimeoutDefault.
	Timeout time.Duration
	// LeaseMargin is added to Timeout to make a claim's lease: a sender
	// killed mid-attempt delays its actions by that long. It must cover the
	// time between the claim's commit and the request's start. Defaults to
	// LeaseMarginDefault.
	LeaseMargin time.Duration
	// BatchSize caps the actions one claim takes; they are sent at once.
	// Defaults to BatchSizeDefault.
	BatchSize int
	// PollInterval is how long an idle sender waits before it looks again.
	// Defaults to PollIntervalDefault.
	PollInterval time.Duration
	// BackoffBase is the delay after the first failed attempt; it doubles
	// per attempt, with jitter. Defaults to BackoffBaseDefault.
	BackoffBase time.Duration
	// BackoffMax caps the delay. Defaults to BackoffMaxDefault.
	BackoffMax time.Duration
	// MaxAttempts is how many attempts an action gets (after each replay)
	// before it is dead. Defaults to MaxAttemptsDefault.
	MaxAttempts int
	// SenderID names this sender in claimed_by and logs. Defaults to
	// host-pid-random.
	SenderID string
	// Transport makes the requests. Defaults to a clone of
	// http.DefaultTransport.
	Transport http.RoundTripper
	// Registerer receives the metrics. Defaults to a private registry.
	Registerer prometheus.Registerer
}

// WithDefaults returns cfg with defaults filled in.
func (c Config) WithDefaults() Config {
	c.Timeout = cmp.Or(c.Timeout, TimeoutDefault)
	c.LeaseMargin = cmp.Or(c.LeaseMargin, LeaseMarginDefault)
	c.BatchSize = cmp.Or(c.BatchSize, BatchSizeDefault)
	c.PollInterval = cmp.Or(c.PollInterval, PollIntervalDefault)
	c.BackoffBase = cmp.Or(c.BackoffBase, BackoffBaseDefault)
	c.BackoffMax = cmp.Or(c.BackoffMax, BackoffMaxDefault)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, MaxAttemptsDefault)
	c.Effects = c.Effects.With(action.DefaultEffects)
	if c.SenderID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = crand.Read(b[:])
		c.SenderID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Transport == nil {
		c.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if c.Registerer == nil {
		c.Registerer = prometheus.NewRegistry()
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Timeout < 0 || c.LeaseMargin < 0 || c.PollInterval < 0 || c.BackoffBase < 0 || c.BackoffMax < 0:
		return errors.New("effects config: durations must not be negative")
	case c.BatchSize < 1:
		return errors.New("effects config: BatchSize must be at least 1")
	case c.MaxAttempts < 1:
		return errors.New("effects config: MaxAttempts must be at least 1")
	}
	if c.ReceiptURL != "" {
		if err := action.CheckURL(c.ReceiptURL); err != nil {
			return fmt.Errorf("effects config: ReceiptURL: %w", err)
		}
	}
	if err := c.Effects.Validate(); err != nil {
		return fmt.Errorf("effects config: %w", err)
	}
	if err := c.Subscribers.Validate(true); err != nil {
		return fmt.Errorf("effects config: %w", err)
	}
	for _, sub := range c.Subscribers {
		if c.Effects.Find(sub.Kind()) != nil {
			return fmt.Errorf("effects config: effect kind %s is also subscriber %s's", sub.Kind(), sub.Name)
		}
	}
	return nil
}

// url is where kind's effects are POSTed; "" for none.
func (c Config) url(e action.Effect) string {
	if e.URL == "" && e.Kind == action.KindReceipt {
		return c.ReceiptURL
	}
	return e.URL
}

// Sender claims due actions, performs them and records their outcomes.
type Sender struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	cfg    Config
	client *http.Client
	urls   map[string]string // kind → URL
	facts  map[string]string // kind → the fact type it is about ("" for a transition's)
	// secrets holds the Standard Webhooks key of each subscriber's kind;
	// a kind in it is claimed in order and signed.
	secrets map[string]string
	kinds   []string
	metrics *metrics

	// afterSend, when set (tests), runs after a request's outcome is known
	// and before it is written; an error skips the write, as if the
	// process died there.
	afterSend func(ctx context.Context, c action.Claimed, o outcome) error
}

// New builds a Sender; Run starts it.
func New(pool *pgxpool.Pool, log *slog.Logger, cfg Config) (*Sender, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Sender{pool: pool, log: log.With(slog.String("service", "effects")), cfg: cfg,
		client: &http.Client{Transport: cfg.Transport,
			// A redirect is a misconfigured URL; following it would re-send
			// a POST (307/308) or turn it into a GET (301-303).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		urls:    map[string]string{},
		facts:   map[string]string{},
		secrets: map[string]string{},
		metrics: newMetrics(),
	}
	for _, e := range cfg.Effects {
		if u := cfg.url(e); u != "" {
			s.urls[e.Kind], s.facts[e.Kind] = u, e.OnFact
			s.kinds = append(s.kinds, e.Kind)
		}
	}
	for _, sub := range cfg.Subscribers {
		s.urls[sub.Kind()], s.secrets[sub.Kind()] = sub.URL, sub.Secret
		s.kinds = append(s.kinds, sub.Kind())
	}
	if err := s.metrics.register(cfg.Registerer); err != nil {
		return nil, err
	}
	return s, nil
}

// Run sends due actions until ctx ends. Attempts in flight when ctx ends
// finish (within Timeout) and their outcomes are written. With no URL
// configured it only waits: receipts stay pending.
func (s *Sender) Run(ctx context.Context) error {
	if len(s.kinds) == 0 {
		s.log.WarnContext(ctx, "effects sender idle: "+ReasonNoURL)
		<-ctx.Done()
		return nil
	}
	s.log.InfoContext(ctx, "effects sender", slog.String("sender", s.cfg.SenderID), slog.Any("kinds", s.kinds))
	var backoff time.Duration
	for {
		n, err := s.SendDue(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			s.log.WarnContext(ctx, "send due actions", slog.String("error", err.Error()), slog.Duration("backoff", backoff))
		case n == s.cfg.BatchSize:
			backoff = 0
			continue // more may be due
		default:
			backoff = s.cfg.PollInterval
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
	}
}

// SendDue claims one batch of due actions, performs them concurrently and
// records their outcomes. It returns how many it claimed.
func (s *Sender) SendDue(ctx context.Context) (int, error) {
	if len(s.kinds) == 0 {
		return 0, nil
	}
	// The requests' deadline counts from before the claim, so it ends before
	// the lease the claim takes (Timeout + LeaseMargin from Postgres's now()
	// during the claim).
	deadline := time.Now().Add(s.cfg.Timeout)
	var batch []action.Claimed
	for _, kind := range s.kinds {
		var b []action.Claimed
		var err error
		if _, ordered := s.secrets[kind]; ordered {
			b, err = action.ClaimOrdered(ctx, s.pool, kind, s.cfg.BatchSize-len(batch), s.lease())
		} else {
			b, err = action.Claim(ctx, s.pool, kind, s.facts[kind], s.cfg.BatchSize-len(batch), s.lease())
		}
		if err != nil && len(batch) == 0 {
			return 0, err
		}
		if err != nil {
			// What is claimed is sent now, not left to its lease.
			s.log.WarnContext(ctx, "claim due actions", slog.String("kind", kind), slog.String("error", err.Error()))
			break
		}
		batch = append(batch, b...)
		if len(batch) == s.cfg.BatchSize {
			break
		}
	}
	var wg sync.WaitGroup
	for _, c := range batch {
		if c.Status == action.StatusDead {
			s.log.WarnContext(ctx, "action dead: attempts exhausted after an interrupted attempt",
				slog.String("key", c.Key.String()), slog.Int("attempts", c.Attempts))
			s.metrics.sends.WithLabelValues(c.Key.Kind, action.StatusDead).Inc()
			continue
		}
		if c.Interrupted {
			s.metrics.interrupted.WithLabelValues(c.Key.Kind).Inc()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.perform(ctx, c, deadline)
		}()
	}
	wg.Wait()
	return len(batch), nil
}

// perform makes one attempt and records it. The attempt and its write
// outlive a cancelled ctx (bounded by the deadline and SettleTimeout): an
// outcome that is known is written rather than left to the lease.
func (s *Sender) perform(ctx context.Context, c action.Claimed, deadline time.Time) {
	ctx = context.WithoutCancel(ctx)
	var o outcome
	ctx, span := startSend(ctx, c)
	if span.IsRecording() {
		defer func() { tracing.End(span, nil, attribute.String("hookyard.outcome", o.status)) }()
	}
	if c.Fact == nil && c.Body == nil {
		o = outcome{status: action.StatusDead, err: fmt.Sprintf("no %s fact recorded for %s", s.facts[c.Key.Kind], c.Key.SubjectID)}
	} else {
		start := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		o = s.post(rctx, s.urls[c.Key.Kind], c)
		cancel()
		s.metrics.duration.WithLabelValues(c.Key.Kind).Observe(time.Since(start).Seconds())
	}
	if s.afterSend != nil {
		if err := s.afterSend(ctx, c, o); err != nil {
			return
		}
	}
	status, err := s.settle(ctx, c, o)
	s.metrics.sends.WithLabelValues(c.Key.Kind, o.status).Inc()
	attrs := []any{slog.String("key", c.Key.String()), slog.Int("attempt", c.Attempts), slog.String("outcome", o.status)}
	if o.err != "" {
		attrs = append(attrs, slog.String("detail", o.err))
	}
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "record action outcome; the lease will expire and the action be sent again with the same key",
			append(attrs, slog.String("error", err.Error()))...)
	case status == "":
		s.log.WarnContext(ctx, "action outcome not recorded: lease lost to another sender", attrs...)
	case status == action.StatusSent:
		s.log.DebugContext(ctx, "action sent", attrs...)
	default:
		s.log.InfoContext(ctx, "action not sent", append(attrs, slog.String("status", status))...)
	}
}

// lease is how this sender claims.
func (s *Sender) lease() action.Lease {
	return action.Lease{For: s.cfg.Timeout + s.cfg.LeaseMargin, MaxAttempts: s.cfg.MaxAttempts, SenderID: s.cfg.SenderID}
}

// settle records an attempt's outcome while the lease is held; see
// action.Settle.
func (s *Sender) settle(ctx context.Context, c action.Claimed, o outcome) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, SettleTimeout)
	defer cancel()
	var retryIn time.Duration
	if o.status == action.StatusFailed || o.status == action.StatusAmbiguous {
		// Counted from the last replay: a replayed action starts again
		// from BackoffBase, not from where its exhausted budget left it.
		retryIn = s.backoff(c.SinceReplay, o.retryAfter)
	}
	return action.Settle(ctx, s.pool, c, action.Outcome{Status: o.status, Error: o.err, RetryIn: retryIn}, s.cfg.MaxAttempts)
}

// backoff is exponential with jitter in [d/2, d], at least retryAfter
// (the server's Retry-After), capped at BackoffMax.
func (s *Sender) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := s.cfg.BackoffBase << min(max(attempt-1, 0), 30)
	if d <= 0 || d > s.cfg.BackoffMax {
		d = s.cfg.BackoffMax
	}
	d = d/2 + rand.N(d/2+1)
	return min(max(d, retryAfter), s.cfg.BackoffMax)
}
