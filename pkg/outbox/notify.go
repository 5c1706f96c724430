// Package outbox wakes the outbox relays after a commit.
//
// The relays LISTEN on Channel and also poll. The outbox's trigger notifies
// from the inserting transaction (migration 00045), and a transaction that
// notifies takes, at commit, a lock Postgres holds for every notifying
// transaction until that commit is done (async.c, PreCommit_Notify:
// "Serialize writers by acquiring a special lock that we hold till after
// commit"; it also gives the transaction an XID, so its commit waits for its
// WAL flush): notifying transactions commit one at a time, each behind the
// previous one's flush, where others share flushes. The services that write
// the outbox all the time (intake, the processor's change records) therefore
// do not notify from their transactions: intake sets QuietSQL in its
// transaction, change records never notify from theirs, and both call a
// Notifier's Wake after the commit.
//
// A Notifier sends its notifications from a connection of its own, outside
// the service's pool, so a notification never waits for (or holds) a
// connection the service's writes need. That session commits asynchronously
// (synchronous_commit = off): a notification is a wake-up, not data, so its
// commit holds the notify lock for a moment, not for a WAL flush. Requests
// made while one notification is sent, or within MinGap after it, fold into
// the next, so a busy service sends at most one notification per MinGap.
package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
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

// MinGap is the shortest time between two notifications of one Notifier:
// the longest a relay that is idle waits for rows past their commit, and
// what bounds the relays' wake-ups (each one is a claim) under load.
const MinGap = 2 * time.Millisecond

// retryAfter is how long a Notifier waits before it connects again after
// a failure; the relays' polls cover the rows meanwhile.
const retryAfter = time.Second

// notifyTimeout bounds one notification, connecting included: a database
// that stops answering costs the relays their wake-ups (they poll), never
// a Notifier stuck on a dead connection for good.
const notifyTimeout = 5 * time.Second

// Notifier wakes the relays after commits.
type Notifier struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	ch   chan struct{}
	conn *pgx.Conn // Run's, nil until it connects
}

// NewNotifier returns a Notifier that connects as pool does; Run sends its
// notifications.
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
// sent, or within MinGap after it, fold into the next) until ctx ends, and
// then closes its connection. A failure is logged at debug level and drops
// the connection: the relays find the rows when they poll.
func (n *Notifier) Run(ctx context.Context) {
	defer n.close()
	var schema string
	var failed time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.ch:
		}
		if !failed.IsZero() && time.Since(failed) < retryAfter {
			continue
		}
		err := n.notify(ctx, &schema)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			n.log.DebugContext(ctx, "wake the outbox relays; they find the rows when they poll", slog.String("error", err.Error()))
			n.close()
			failed = time.Now()
			continue
		}
		failed = time.Time{}
		select {
		case <-ctx.Done():
			return
		case <-time.After(MinGap):
		}
	}
}

// notify sends one notification on the Notifier's connection, connecting
// and reading the outbox's schema first when it has none.
func (n *Notifier) notify(ctx context.Context, schema *string) error {
	ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
	defer cancel()
	if n.conn == nil {
		cfg := n.pool.Config().ConnConfig.Copy()
		if cfg.RuntimeParams == nil {
			cfg.RuntimeParams = map[string]string{}
		}
		cfg.RuntimeParams["synchronous_commit"] = "off"
		if app := cfg.RuntimeParams["application_name"]; app != "" {
			cfg.RuntimeParams["application_name"] = app + " notify"
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return err
		}
		n.conn = conn
	}
	if *schema == "" {
		if err := n.conn.QueryRow(ctx, schemaSQL).Scan(schema); err != nil {
			return err
		}
	}
	_, err := n.conn.Exec(ctx, notifySQL, Channel, *schema)
	return err
}

func (n *Notifier) close() {
	if n.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = n.conn.Close(ctx)
		n.conn = nil
	}
}
