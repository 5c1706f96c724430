// Package dbtest gives each test its own migrated schema in the test
// database, so tests run in parallel against one real Postgres.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/db"
)

// DefaultURL is the test database when TEST_DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/hookyard_test?sslmode=disable"

var ensureOnce sync.Once
var ensureErr error

// URL returns the test database's URL.
func URL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Schema is one test's schema.
type Schema struct {
	Name string
	Pool *pgxpool.Pool
}

// New creates a fresh schema, migrates it and returns a pool whose
// connections use it. The schema is dropped when the test ends.
func New(t testing.TB) *Schema {
	t.Helper()
	return NewWithConns(t, 8)
}

// NewWithConns is New with a pool size.
func NewWithConns(t testing.TB, maxConns int32) *Schema {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ensureOnce.Do(func() { ensureErr = db.EnsureDatabase(ctx, URL(), slog.New(slog.NewTextHandler(io.Discard, nil))) })
	require.NoError(t, ensureErr, "test database at %s (set TEST_DATABASE_URL)", URL())
	return NewAt(t, URL(), maxConns)
}

// NewAt creates the schema in the database at url (which must exist).
func NewAt(t testing.TB, url string, maxConns int32) *Schema {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "t_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE SCHEMA "+name)
	require.NoError(t, err)
	require.NoError(t, admin.Close(ctx))

	pool, err := db.Open(ctx, url, db.Options{MaxConns: maxConns, SearchPath: name, ApplicationName: name})
	require.NoError(t, err)
	require.NoError(t, db.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))))
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, url); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA "+name+" CASCADE")
			_ = c.Close(ctx)
		}
	})
	return &Schema{Name: name, Pool: pool}
}
