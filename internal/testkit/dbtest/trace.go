package dbtest

import (
	"context"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// Trace records what a pool sends: each statement's SQL, and its round
// trips (a statement alone, or a batch, is one).
type Trace struct {
	mu    sync.Mutex
	sql   []string
	trips int
}

// Traced returns a pool on the schema whose statements t records; the pool
// closes when the test ends.
func (s *Schema) Traced(tb testing.TB) (*pgxpool.Pool, *Trace) {
	tb.Helper()
	tr := &Trace{}
	cfg := s.Pool.Config().Copy()
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(tb.Context(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	return pool, tr
}

// Reset forgets what was recorded.
func (t *Trace) Reset() {
	t.mu.Lock()
	t.sql, t.trips = nil, 0
	t.mu.Unlock()
}

// RoundTrips is the number of round trips since the last Reset.
func (t *Trace) RoundTrips() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.trips
}

// SQL is the statements sent since the last Reset, batches' included.
func (t *Trace) SQL() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.sql...)
}

func (t *Trace) add(sql string, trip bool) {
	t.mu.Lock()
	if sql != "" {
		t.sql = append(t.sql, sql)
	}
	if trip {
		t.trips++
	}
	t.mu.Unlock()
}

// TraceQueryStart records a statement sent alone.
func (t *Trace) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	t.add(d.SQL, true)
	return ctx
}

// TraceQueryEnd does nothing.
func (t *Trace) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart records a batch's round trip.
func (t *Trace) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.add("", true)
	return ctx
}

// TraceBatchQuery records a statement of a batch.
func (t *Trace) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	t.add(d.SQL, false)
}

// TraceBatchEnd does nothing.
func (t *Trace) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}
