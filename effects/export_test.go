package effects

import "context"

// SetAfterSend makes s call f after each request's outcome is known and
// before it is written; an error from f skips the write, as if the process
// died between the two. The key and attempt are the claimed action's.
func SetAfterSend(s *Sender, f func(ctx context.Context, key string, attempt int, status string) error) {
	s.afterSend = func(ctx context.Context, c claimed, o outcome) error {
		return f(ctx, c.key.String(), c.attempts, o.status)
	}
}

// ClaimSQL is the claim statement, for its plan test.
const ClaimSQL = claimSQL
