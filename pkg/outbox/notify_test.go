package outbox_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/outbox"
)

// listen returns a connection that listens on outbox.Channel, outside the
// pool under test.
func listen(t *testing.T, s *dbtest.Schema) *pgx.Conn {
	t.Helper()
	ctx := t.Context()
	conn, err := pgx.ConnectConfig(ctx, s.Pool.Config().ConnConfig.Copy())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, "LISTEN "+outbox.Channel)
	require.NoError(t, err)
	return conn
}

// heard counts the notifications for schema within d (tests in other
// schemas of the database notify the same channel).
func heard(ctx context.Context, conn *pgx.Conn, schema string, d time.Duration) int {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	count := 0
	for {
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			return count
		}
		if n.Payload == schema {
			count++
		}
	}
}

// A notification never needs a connection of the service's pool: a receiver
// whose pool is busy with commits still wakes the relays, and its
// notifications take nothing from those commits. Fails with a Notifier that
// sends on the pool.
func TestNotifierWakesWithItsPoolExhausted(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	listener := listen(t, s)

	cfg := s.Pool.Config().Copy()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	held, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer held.Release()

	n := outbox.NewNotifier(pool, slog.New(slog.DiscardHandler))
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n.Run(rctx) }()
	defer func() { stop(); <-done }()

	n.Wake()
	require.Equal(t, 1, heard(ctx, listener, s.Name, 3*time.Second), "one Wake, with the pool's only connection held, did not notify once")
}

// Requests fold: a service that commits all the time sends at most one
// notification per outbox.MinGap, so the relays' wake-ups (each a claim) do
// not grow with its commit rate. Fails without the gap (one notification
// per round trip, several times as many here).
func TestNotifierSendsAtMostOnePerGap(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	listener := listen(t, s)
	n := outbox.NewNotifier(s.Pool, slog.New(slog.DiscardHandler))
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); n.Run(rctx) }()

	const busy = 300 * time.Millisecond
	start := time.Now()
	for time.Since(start) < busy {
		n.Wake()
		time.Sleep(50 * time.Microsecond)
	}
	elapsed := time.Since(start)
	stop()
	<-done
	got := heard(ctx, listener, s.Name, time.Second)
	bound := int(elapsed/outbox.MinGap) + 2
	t.Logf("%d notifications for %v of requests every 50µs (bound %d)", got, elapsed, bound)
	require.Positive(t, got, "no notification for a busy writer")
	require.LessOrEqual(t, got, bound, "more than one notification per MinGap")
}
