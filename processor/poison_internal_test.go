package processor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
)

// Whatever will fail again for this event, whatever the retry, is poison:
// here a real 54000 (program_limit_exceeded: index row too large) from
// Postgres, which a retry of the same batch meets every time.
func TestProgramLimitErrorsAreIsolatedAsPoison(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	_, err := s.Pool.Exec(ctx, `CREATE TABLE limits (id text PRIMARY KEY)`)
	require.NoError(t, err)
	raw := make([]byte, 4000)
	_, _ = rand.Read(raw)
	_, err = s.Pool.Exec(ctx, `INSERT INTO limits VALUES ($1)`, hex.EncodeToString(raw))
	require.Error(t, err)
	require.True(t, poison(err), "54000 is poison: %v", err)

	// An unreachable or busy database is not: the batch is retried.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.Pool.Exec(cctx, `SELECT 1`)
	require.Error(t, err)
	require.False(t, poison(err))
}
