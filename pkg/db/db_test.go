package db_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/schemas"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// withDatabase returns the test server's URL with another database name.
func withDatabase(t *testing.T, name string) string {
	t.Helper()
	u, err := url.Parse(dbtest.URL())
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}

// `hookyard dev` and `hookyard migrate` on a fresh server create their
// database; several processes starting at once must all succeed, and a
// database that exists is left alone. Fails if a missing database is not
// created, or if the losers of the creation race fail.
func TestEnsureDatabaseCreatesAMissingDatabaseOnceUnderConcurrentStarts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	name := randomName("hookyard_dbtest_")
	dsn := withDatabase(t, name)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, withDatabase(t, "postgres")); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(ctx)
		}
	})

	_, err := pgx.Connect(ctx, dsn)
	require.Error(t, err, "the database does not exist yet")

	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = db.EnsureDatabase(ctx, dsn, quiet()) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	c, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))

	var logged bytes.Buffer
	require.NoError(t, db.EnsureDatabase(ctx, dsn, slog.New(slog.NewTextHandler(&logged, nil))))
	require.NotContains(t, logged.String(), "created database", "an existing database is left alone")
}

// Open applies the pool options to every connection, and says which step
// failed. Fails if the search path (each test's schema) or the application
// name (what pg_stat_activity shows an operator) is not applied.
func TestOpenAppliesOptionsToEveryConnection(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, db.EnsureDatabase(ctx, dbtest.URL(), quiet()))

	pool, err := db.Open(ctx, dbtest.URL(), db.Options{MaxConns: 3, SearchPath: "some_schema", ApplicationName: "hookyard-test"})
	require.NoError(t, err)
	defer pool.Close()
	require.Equal(t, int32(3), pool.Config().MaxConns)
	var path, app string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_setting('search_path'), current_setting('application_name')`).Scan(&path, &app))
	require.Equal(t, "some_schema", path)
	require.Equal(t, "hookyard-test", app)

	def, err := db.Open(ctx, dbtest.URL(), db.Options{})
	require.NoError(t, err)
	defer def.Close()
	require.NoError(t, def.QueryRow(ctx, `SELECT current_setting('application_name')`).Scan(&app))
	require.Equal(t, "hookyard", app)

	_, err = db.Open(ctx, "postgres://%zz", db.Options{})
	require.ErrorContains(t, err, "parse database url")
	_, err = db.Open(ctx, "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1", db.Options{})
	require.ErrorContains(t, err, "ping database")
}

// Migrate applies every embedded migration once, into the schema of the
// pool's search path, and a second run applies nothing. Fails if a
// migration is skipped, applied twice, or lands outside the search path.
func TestMigrateAppliesEveryEmbeddedMigrationOnce(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, db.EnsureDatabase(ctx, dbtest.URL(), quiet()))
	schema := randomName("t_migrate_")
	admin, err := pgx.Connect(ctx, dbtest.URL())
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+schema)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
		_ = admin.Close(ctx)
	})
	pool, err := db.Open(ctx, dbtest.URL(), db.Options{MaxConns: 2, SearchPath: schema})
	require.NoError(t, err)
	defer pool.Close()

	files, err := fs.Glob(schemas.Migrations, "migrations/*.sql")
	require.NoError(t, err)
	require.NotEmpty(t, files)

	var logged bytes.Buffer
	require.NoError(t, db.Migrate(ctx, pool, slog.New(slog.NewTextHandler(&logged, nil))))
	require.Equal(t, len(files), strings.Count(logged.String(), "applied migration"), logged.String())
	for _, table := range []string{"webhook_inbox", "outbox", "projection", "subscription_projection", "partition_fence", "topic_fence"} {
		var found *string
		require.NoError(t, pool.QueryRow(ctx, `SELECT to_regclass($1)::text`, schema+"."+table).Scan(&found))
		require.NotNil(t, found, "%s in the search path's schema", table)
	}

	logged.Reset()
	require.NoError(t, db.Migrate(ctx, pool, slog.New(slog.NewTextHandler(&logged, nil))))
	require.NotContains(t, logged.String(), "applied migration", "a second run applies nothing")
}
