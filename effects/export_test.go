package effects

import (
	"context"

	"github.com/hookyard/hookyard/pkg/action"
)

// SetAfterSend makes s call f after each request's outcome is known and
// before it is written; an error from f skips the write, as if the process
// died between the two. The key and attempt are the claimed action's.
func SetAfterSend(s *Sender, f func(ctx context.Context, key string, attempt int, status string) error) {
	s.afterSend = func(ctx context.Context, c action.Claimed, o outcome) error {
		return f(ctx, c.Key.String(), c.Attempts, o.status)
	}
}
