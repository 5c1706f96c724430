package db_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/db"
)

// Services started together on a fresh database all start: their
// migrations run one after another under a lock, instead of racing into
// "duplicate key" on goose's version table (a rollout of several pods at
// once used to crash-loop). Eight migrators, each with its own pool, as
// eight processes would be.
func TestServicesStartedTogetherAllMigrate(t *testing.T) {
	t.Parallel()
	dbtest.New(t) // makes sure the test database exists
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, dbtest.URL())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		_ = admin.Close(context.Background())
	})

	const services = 8
	errs := make([]error, services)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pool, err := db.Open(ctx, dbtest.URL(), db.Options{MaxConns: 4, SearchPath: schema})
			if err != nil {
				errs[i] = err
				return
			}
			defer pool.Close()
			<-start
			errs[i] = db.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil)))
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "service %d", i)
	}
	var applied, distinct int
	require.NoError(t, admin.QueryRow(ctx, `SELECT count(*), count(DISTINCT version_id) FROM `+schema+`.goose_db_version WHERE version_id > 0`).Scan(&applied, &distinct))
	require.Equal(t, distinct, applied, "each migration applied once")
}
