// Package outbox wakes the outbox relays after a commit.
//
// The relays LISTEN on Channel and also poll. The outbox's trigger notifies
// from the inserting transaction (migration 00045), and a transaction that
// notifies takes, at commit, a lock Postgres holds for every notifying
// transaction until that commit is durable (async.c, PreCommit_Notify:
// "Serialize writers by acquiring a special lock that we hold till after
// commit"): notifying transactions commit one at a time, each behind the
// previous one's WAL flush, where others share flushes. The services that
// write the outbox all the time (intake, the processor's change records)
// therefore do not notify from their transactions: intake sets Quiet in its
// transaction, change records never notify from theirs, and both call a
// Notifier's Wake after the commit. Its notification is a statement of its
// own that writes nothing; such a commit waits for no flush and holds that
// lock for a moment only. Requests made while one notification is sent fold
// into the next, so a busy service sends about one per round trip.
package outbox

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Channel is the LISTEN/NOTIFY channel that wakes the relays; the payload
// is the schema of the outbox written to.
const Channel = "hookyard_outbox"

// QuietSQL, run in a transaction before its outbox insert, tells the
// outbox's trigger not to notify: the writer notifies after its commit
// (Notifier).
const QuietSQL = `SELECT set_config('hookyard.outbox_notify', 'after_commit', true)`

// schemaSQL is the schema of the outbox this pool writes to: the payload
// the trigger sends (TG_TABLE_SCHEMA) and the relays compare.
const schemaSQL = `SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = 'outbox'::regclass`

// notifySQL is the notification: a prepared statement with parameters,
// planned once per connection.
const notifySQL = `SELECT pg_notify($1, $2)`

// Notifier wakes the relays after commits.
type Notifier struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	ch   chan struct{}
}

// NewNotifier returns a Notifier; Run sends its notifications.
func NewNotifier(pool *pgxpool.Pool, log *slog.Logger) *Notifier {
	return &Notifier{pool: pool, log: log, ch: make(chan struct{}, 1)}
}

// Wake asks for a notification, after a commit that wrote outbox rows. It
// never blocks.
func (n *Notifier) Wake() {
	select {
	case n.ch <- struct{}{}:
	default:
	}
}

// Run sends a notification for each request (requests made while one is
// sent fold into the next) until ctx ends. A failed one is logged at debug
// level: the relays find the rows when they poll.
func (n *Notifier) Run(ctx context.Context) {
	var schema string
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.ch:
		}
		if schema == "" {
			if err := n.pool.QueryRow(ctx, schemaSQL).Scan(&schema); err != nil {
				if ctx.Err() == nil {
					n.log.DebugContext(ctx, "find the outbox's schema; the relays find its rows when they poll", slog.String("error", err.Error()))
				}
				continue
			}
		}
		if _, err := n.pool.Exec(ctx, notifySQL, Channel, schema); err != nil && ctx.Err() == nil {
			n.log.DebugContext(ctx, "wake the outbox relays; they find the rows when they poll", slog.String("error", err.Error()))
		}
	}
}
