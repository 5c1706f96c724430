package processor

import (
	"context"
	"log/slog"
)

// The outbox's trigger wakes the relays for the events topic's rows only
// (migration 00045): a transaction that notifies takes, at commit, a lock
// Postgres holds for every notifying transaction until that commit is
// durable, so notifying transactions commit one at a time. Had the
// processor's write transactions notified for their change records, each
// would have committed in line with intake's, and intake's answers would
// have waited on the processor's WAL flushes (HTTP p99 482 ms against 79 ms
// at 1,000 events/s). The processor tells the relays after its commit
// instead, from a statement of its own that writes nothing: such a commit
// waits for no flush, so it holds that lock for a moment only. The requests
// of many batches fold into one notification; the relays also poll.

// outboxNotifySQL notifies the relays of the outbox the processor writes to,
// with the payload the trigger uses (that outbox's schema).
const outboxNotifySQL = `SELECT pg_notify('hookyard_outbox', n.nspname)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'outbox'::regclass`

// changesCommitted asks notifyLoop to wake the relays; it never blocks.
func (p *Processor) changesCommitted() {
	select {
	case p.changes <- struct{}{}:
	default:
	}
}

// notifyLoop sends a notification for each request (requests made while
// one is sent fold into the next) until ctx ends.
func (p *Processor) notifyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.changes:
		}
		if _, err := p.pool.Exec(ctx, outboxNotifySQL); err != nil && ctx.Err() == nil {
			p.log.DebugContext(ctx, "notify the relays of change records; they find them when they poll", slog.String("error", err.Error()))
		}
	}
}
