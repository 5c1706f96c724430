package provider

import (
	"context"
	"errors"

	"github.com/hookyard/hookyard/pkg/message"
)

// Fetcher reads a resource's current state from its provider. It is called
// with no database transaction open. It must read with the credentials of
// the resource's own source account and environment, never another's.
type Fetcher interface {
	Fetch(ctx context.Context, r message.Resource) (Fetched, error)
}

// Fetched is a resource's state as the provider reports it now.
type Fetched struct {
	State   []byte
	Status  string
	Deleted bool
}

// ErrNotFound is what a Fetcher wraps when the provider says the resource
// does not exist. It is recorded apart from other failures
// (fetch_not_found), and retried and then dead like any of them: an
// unexplained 404 never becomes a state.
var ErrNotFound = errors.New("resource not found at provider")

// ErrNotAttempted is what a Fetcher wraps when no request reached the
// provider: its breaker was open or its local rate limiter refused the call.
// Such a try is retried like any failure, inside the retry window, but it is
// not counted as an attempt: an open breaker during an outage must not use
// up an event's attempts while the provider never saw them.
var ErrNotAttempted = errors.New("not attempted: no request reached the provider")

type backgroundKey struct{}

// Background marks calls made with the returned context as background
// reads: the reconciler's. A provider client that keeps a smaller bucket
// for them (Stripe's reconciler.stripe_rate) makes them wait for it too, so
// a reconciliation round never takes the quota live fetches need.
func Background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// IsBackground reports whether ctx was made by Background.
func IsBackground(ctx context.Context) bool {
	b, _ := ctx.Value(backgroundKey{}).(bool)
	return b
}
