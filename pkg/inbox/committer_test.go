package inbox_test

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// Group commit must not let one request's bad data fail the others that
// happen to share its statement: they are stored and answered, only the bad
// one gets the error. Without the split, every request of the batch fails.
func TestGroupCommitIsolatesARejectedRequest(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	exec(t, s.Pool, `ALTER TABLE webhook_inbox ADD CONSTRAINT refuse_poison CHECK (event_id <> 'evt_poison')`)
	c := inbox.NewCommitter(s.Pool, slog.New(slog.NewTextHandler(io.Discard, nil)), inbox.CommitterConfig{Workers: 1})
	t.Cleanup(c.Stop)

	// Hold the only commit worker on a row lock, so the next requests queue
	// up and are drained into one batch.
	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type)
VALUES ($1, $2, $3, 'evt_block', 'x', 'x')`, endpoint.Provider, endpoint.SourceAccount, endpoint.Environment)
	require.NoError(t, err)
	blocked := make(chan struct{})
	go func() {
		defer close(blocked)
		_, _ = c.Submit(ctx, record("evt_block", "sub_block"))
	}()
	require.Eventually(t, func() bool {
		return count(t, s.Pool, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = $1 AND NOT l.granted`, s.Name) > 0
	}, 10*time.Second, 10*time.Millisecond, "commit worker waits on the row lock")

	const n = 20
	var wg sync.WaitGroup
	results := make([]inbox.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("evt_ok_%d", i)
			if i == n/2 {
				id = "evt_poison"
			}
			results[i], errs[i] = c.Submit(ctx, record(id, "sub_x"))
		}()
	}
	time.Sleep(200 * time.Millisecond) // let the submitters queue behind the worker; correctness does not depend on it
	require.NoError(t, tx.Rollback(ctx))
	<-blocked
	wg.Wait()
	for i := range n {
		if i == n/2 {
			require.Error(t, errs[i])
			continue
		}
		require.NoError(t, errs[i], "request %d failed with the poisoned one", i)
		require.Equal(t, inbox.Accepted, results[i])
	}
	require.Equal(t, n-1, count(t, s.Pool, `SELECT count(*) FROM webhook_inbox WHERE event_id LIKE 'evt_ok_%'`))
	require.Equal(t, n, count(t, s.Pool, `SELECT count(*) FROM outbox`))
}
