package outboxrelay

import (
	"context"
	"log/slog"
	"time"
)

// idle waits for a notification (or a failed batch's wake-up) or the poll interval.
func (r *Relay) idle(ctx context.Context) {
	t := time.NewTimer(r.cfg.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-r.wake:
	case <-t.C:
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// listen keeps a connection LISTENing on Channel and turns notifications
// into wake-ups; when the connection breaks it reconnects with a pause, and
// the relay polls meanwhile.
func (r *Relay) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.WarnContext(ctx, "outbox notifications lost; polling until the listener reconnects", slog.String("error", err.Error()))
		sleep(ctx, r.cfg.PollInterval)
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	pc, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// A LISTENing connection must not go back to the pool.
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	var schema string
	if err := conn.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	r.signal() // rows may have arrived before LISTEN took effect
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == schema { // the payload is the schema of the outbox written to
			r.signal()
		}
	}
}

func (r *Relay) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}
