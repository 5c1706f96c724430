package processor

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/hookyard/hookyard/pkg/inbox"
)

func (p *Processor) retryLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := inbox.EnqueueDue(ctx, p.pool, p.cfg.Now(), 500)
		if err != nil {
			if ctx.Err() == nil {
				p.log.WarnContext(ctx, "enqueue due retries", slog.String("error", err.Error()))
			}
			continue
		}
		if n > 0 {
			p.metrics.retriesEnqueued.Add(float64(n))
		}
	}
}

// retryAfter is implemented by provider errors that say when to try again
// (a provider client's answers with a Retry-After header).
type retryAfter interface{ RetryAfter() time.Duration }

// exhausted says whether an event failing since first has no retry left at
// now: its retry window ended, or the optional attempt cap is reached.
func (p *Processor) exhausted(first, now time.Time, attempts int) bool {
	if !now.Before(first.Add(p.cfg.RetryWindow)) {
		return true
	}
	return p.cfg.MaxAttempts > 0 && attempts >= p.cfg.MaxAttempts
}

// nextAttempt is when an event failing since first is tried again. The
// delay is about the time it has been failing (between BackoffBase and
// BackoffMax, with jitter in [d/2, d]), so delays double per try whether or
// not the try reached the provider, and never pass the window's end: the
// last try happens when the window closes. A failure that says when to come
// back (a 429's or 503's Retry-After) is not retried sooner.
func (p *Processor) nextAttempt(first, now time.Time, failure error) time.Time {
	d := min(max(now.Sub(first), p.cfg.BackoffBase), p.cfg.BackoffMax)
	if d <= 0 {
		d = 1
	}
	next := now.Add(d/2 + rand.N(d/2+1))
	var ra retryAfter
	if errors.As(failure, &ra) && now.Add(ra.RetryAfter()).After(next) {
		next = now.Add(ra.RetryAfter())
	}
	if end := first.Add(p.cfg.RetryWindow); next.After(end) {
		next = end
	}
	return next
}
