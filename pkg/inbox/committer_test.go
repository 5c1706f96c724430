package inbox_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
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

// Batches that share keys insert them in one fixed order, so two statements
// never wait on each other's uncommitted rows in a cycle (a deadlock, 40P01,
// would fail both batches and answer 503 to every request in them).
func TestConcurrentBatchesWithSharedKeysNeverDeadlock(t *testing.T) {
	t.Parallel()
	s := dbtest.NewWithConns(t, 16)
	const writers, rounds, keys = 8, 15, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	// Every round starts all writers at once on the same fresh keys.
	starts := make([]chan struct{}, rounds)
	arrived := make([]sync.WaitGroup, rounds)
	for r := range starts {
		starts[r] = make(chan struct{})
		arrived[r].Add(writers)
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 1))
			for r := range rounds {
				arrived[r].Done()
				<-starts[r]
				recs := make([]*inbox.Record, keys)
				for i, k := range rnd.Perm(keys) {
					recs[i] = record(fmt.Sprintf("evt_r%d_k%d", r, k), fmt.Sprintf("sub_%d", k))
				}
				if _, err := inbox.Insert(t.Context(), s.Pool, recs, time.Now()); err != nil {
					errs <- err
				}
			}
		}()
	}
	for r := range rounds {
		arrived[r].Wait()
		close(starts[r])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, rounds*keys, count(t, s.Pool, `SELECT count(*) FROM webhook_inbox`))
}

// One request's deadline never cuts the statement short for the others of
// its batch: a request about to expire shares a batch with fresh ones, the
// fresh ones are stored and answered.
func TestOneRequestsDeadlineNeverCancelsItsBatch(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	c := inbox.NewCommitter(s.Pool, slog.New(slog.NewTextHandler(io.Discard, nil)), inbox.CommitterConfig{Workers: 1})
	t.Cleanup(c.Stop)

	// Hold the only worker on a row lock so the next requests form one batch.
	tx, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type)
VALUES ($1, $2, $3, 'evt_block', 'x', 'x')`, endpoint.Provider, endpoint.SourceAccount, endpoint.Environment)
	require.NoError(t, err)
	go func() { _, _ = c.Submit(ctx, record("evt_block", "sub_block")) }()
	require.Eventually(t, func() bool {
		return count(t, s.Pool, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = $1 AND NOT l.granted`, s.Name) > 0
	}, 10*time.Second, 10*time.Millisecond)

	// A short-lived request and a fresh one queue behind the worker. A second
	// transaction holds evt_short's key, so their batch waits past the short
	// request's deadline.
	hold, err := s.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = hold.Exec(ctx, `INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type)
VALUES ($1, $2, $3, 'evt_short', 'x', 'x')`, endpoint.Provider, endpoint.SourceAccount, endpoint.Environment)
	require.NoError(t, err)
	short, cancelShort := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancelShort()
	shortDone := make(chan error, 1)
	go func() { _, err := c.Submit(short, record("evt_short", "sub_1")); shortDone <- err }()
	freshDone := make(chan error, 1)
	go func() {
		fresh, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		_, err := c.Submit(fresh, record("evt_fresh", "sub_2"))
		freshDone <- err
	}()
	time.Sleep(200 * time.Millisecond)   // both queue behind the worker
	require.NoError(t, tx.Rollback(ctx)) // the worker finishes evt_block and takes both in one batch
	time.Sleep(time.Second)              // past the short request's deadline, while the batch waits on evt_short's key
	require.NoError(t, hold.Rollback(ctx))

	require.NoError(t, <-freshDone, "the fresh request is stored despite its batch mate's deadline")
	<-shortDone
	require.Equal(t, 1, count(t, s.Pool, `SELECT count(*) FROM webhook_inbox WHERE event_id = 'evt_fresh'`))
}

// Intake that finds no partition for its body fails loudly: an error (the
// receiver answers 5xx, the provider retries), nothing stored, not a
// delivery kept dead as if its data were at fault. There is no DEFAULT
// partition to take the body instead. Fails if a missing partition is
// taken for the event's own refusal (kept dead, answered 400: the provider
// would never deliver it again).
func TestIntakeWithoutAPartitionFailsLoudly(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	exec(t, s.Pool, `DO $$ DECLARE p regclass; BEGIN
    FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'webhook_inbox_body'::regclass LOOP
        EXECUTE format('DROP TABLE %s', p);
    END LOOP; END $$`)
	c := inbox.NewCommitter(s.Pool, slog.New(slog.NewTextHandler(io.Discard, nil)), inbox.CommitterConfig{Workers: 1})
	t.Cleanup(c.Stop)
	_, err := c.Submit(t.Context(), record("evt_nowhere", "sub_1"))
	require.ErrorContains(t, err, "no partition")
	require.Zero(t, count(t, s.Pool, `SELECT count(*) FROM webhook_inbox`), "nothing stored, nothing kept dead")
	require.Zero(t, count(t, s.Pool, `SELECT count(*) FROM outbox`))
}
