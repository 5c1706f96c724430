package outboxrelay_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/outbox"
)

// Only a statement that inserted rows for the events topic notifies the
// relays. A transaction that notifies takes, at commit, the lock Postgres
// holds for notifying transactions until their commit is durable; the
// processor's projection statements hold an INSERT of a change record (that
// mostly inserts nothing), and had they notified, every processor
// transaction would have committed in line with intake's (migration 00045).
// Intake and the processor notify after their commit instead
// (TestChangeRecordWakesAnIdleRelay). Fails with a trigger that notifies for
// every statement, for change records, or in a quiet transaction.
func TestOnlyAnInsertOfEventRowsNotifies(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	c, err := s.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	listener := c.Hijack()
	defer listener.Close(context.Background())
	_, err = listener.Exec(ctx, "LISTEN "+outboxrelay.Channel)
	require.NoError(t, err)
	// Tests in other schemas of the database notify the same channel; the
	// payload names the schema.
	heard := func(within time.Duration) bool {
		wctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		for {
			n, err := listener.WaitForNotification(wctx)
			if err != nil {
				return false
			}
			if n.Payload == s.Name {
				return true
			}
		}
	}

	exec := func(p *pgxpool.Pool, sql string) {
		_, err := p.Exec(ctx, sql)
		require.NoError(t, err)
	}
	// As a projection statement that found nothing to record: an INSERT of
	// no rows, in a writable CTE and alone.
	exec(s.Pool, `WITH change AS (INSERT INTO outbox (message_key, message, topic) SELECT 'k', '{}', 'changes' WHERE false RETURNING id) SELECT count(*) FROM change`)
	exec(s.Pool, `INSERT INTO outbox (message_key, message) SELECT 'k', '{}' WHERE false`)
	require.False(t, heard(500*time.Millisecond), "an insert of no rows notified")
	// As intake, which wakes the relays after its commit (outbox.QuietSQL).
	b := &pgx.Batch{}
	b.Queue(outbox.QuietSQL)
	b.Queue(`INSERT INTO outbox (message_key, message) VALUES ('k', '{}')`)
	require.NoError(t, s.Pool.SendBatch(ctx, b).Close())
	require.False(t, heard(500*time.Millisecond), "an insert in a quiet transaction notified")
	// As a projection statement that recorded a change.
	exec(s.Pool, `INSERT INTO outbox (message_key, message, topic) VALUES ('k', '{}', 'changes')`)
	require.False(t, heard(500*time.Millisecond), "a change record notified from its writer's transaction")

	exec(s.Pool, `INSERT INTO outbox (message_key, message, topic) VALUES ('k', '{}', 'changes'), ('k', '{}', NULL)`)
	require.True(t, heard(5*time.Second), "an insert of an event row did not notify")
}
