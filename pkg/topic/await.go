package topic

import (
	"context"
	"time"
)

// awaitLogEvery spaces the "still waiting" reports of Await.
const awaitLogEvery = 30 * time.Second

// Await calls try until it succeeds, ctx ends, or wait has passed, backing
// off from 250 ms to 5 s between calls. Services are started in any order
// (docker compose, a Kubernetes rollout), so a service that needs its
// brokers and topic waits for them instead of exiting on the first
// "connection refused". waiting is called with the last error and the time
// left, at once and then at most every 30 s, for the service to say what it
// waits for. Await returns nil, ctx's error, or try's last error once wait
// has passed.
func Await(ctx context.Context, wait time.Duration, try func(context.Context) error, waiting func(err error, left time.Duration)) error {
	deadline := time.Now().Add(wait)
	delay := 250 * time.Millisecond
	var reported time.Time
	for {
		err := try(ctx)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().Add(delay).After(deadline):
			return err
		}
		if time.Since(reported) > awaitLogEvery {
			reported = time.Now()
			waiting(err, time.Until(deadline).Round(time.Second))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}
