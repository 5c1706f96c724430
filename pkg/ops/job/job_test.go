package job_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/ops/job"
)

// counter is a job kind that counts to "to" one unit per step, its cursor
// the count so far; block, when set, holds every step after the first until
// it is closed.
func counter(to int, calls *atomic.Int64, block <-chan struct{}) job.Step {
	return func(ctx context.Context, params, cursor json.RawMessage) (json.RawMessage, map[string]int64, bool, error) {
		n := 0
		if len(cursor) > 0 {
			var err error
			if n, err = strconv.Atoi(string(cursor)); err != nil {
				return nil, nil, false, err
			}
		}
		if calls.Add(1) > 1 && block != nil {
			select {
			case <-block:
			case <-ctx.Done():
				return nil, nil, false, ctx.Err()
			}
		}
		n++
		return json.RawMessage(strconv.Itoa(n)), map[string]int64{"counted": 1}, n >= to, nil
	}
}

func waitStatus(t *testing.T, r *job.Runner, id int64, status string) job.Job {
	t.Helper()
	var j job.Job
	require.Eventually(t, func() bool {
		var err error
		j, err = r.Get(context.Background(), id)
		require.NoError(t, err)
		return j.Status == status
	}, 30*time.Second, 20*time.Millisecond, "job %d never became %s", id, status)
	return j
}

// A job is worked in bounded steps in the background: the call that starts
// it returns after the first step, and the job's row says what each step
// did until it is done.
func TestJobRunsInBoundedStepsAndRecordsProgress(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	var calls atomic.Int64
	r := job.New(s.Pool, slog.New(slog.DiscardHandler), job.Config{Steps: map[string]job.Step{"count": counter(5, &calls, nil)}})
	j, err := r.Start(t.Context(), "count", map[string]int{"to": 5})
	require.NoError(t, err)
	require.Equal(t, int64(1), j.Progress["counted"], "the first step ran in the call")
	j = waitStatus(t, r, j.ID, job.StatusDone)
	require.Equal(t, int64(5), j.Progress["counted"])
	require.Equal(t, 5, j.Steps)
	require.JSONEq(t, "5", string(j.Cursor))
	require.NotNil(t, j.FinishedAt)
	require.Equal(t, int64(5), calls.Load())

	_, err = r.Start(t.Context(), "nope", nil)
	require.ErrorIs(t, err, job.ErrUnknownKind)
}

// A job whose runner died (its process stopped mid-job) is taken over once
// its lease runs out and resumed from the last cursor written; the dead
// runner can write nothing afterwards.
func TestJobWhoseRunnerDiedIsResumedFromItsCursor(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	block := make(chan struct{})
	var callsA, callsB atomic.Int64
	cfg := job.Config{Lease: 500 * time.Millisecond, Resume: 100 * time.Millisecond}
	cfg.Steps = map[string]job.Step{"count": counter(4, &callsA, block)}
	a := job.New(s.Pool, slog.New(slog.DiscardHandler), cfg)
	runA, stopA := context.WithCancel(context.Background())
	doneA := make(chan error, 1)
	go func() { doneA <- a.Run(runA) }()
	time.Sleep(50 * time.Millisecond) // Run took its context
	j, err := a.Start(t.Context(), "count", nil)
	require.NoError(t, err)
	require.Equal(t, int64(1), j.Progress["counted"])
	require.Eventually(t, func() bool { return callsA.Load() == 2 }, 10*time.Second, 10*time.Millisecond, "second step started")
	stopA() // runner A dies mid-step: its step ends with the context, its lease runs out
	require.NoError(t, <-doneA)

	cfg.Steps = map[string]job.Step{"count": counter(4, &callsB, nil)}
	b := job.New(s.Pool, slog.New(slog.DiscardHandler), cfg)
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	go func() { _ = b.Run(ctxB) }()
	j = waitStatus(t, b, j.ID, job.StatusDone)
	require.Equal(t, int64(4), j.Progress["counted"], "resumed at the cursor: no step counted twice or lost")
	require.Equal(t, int64(3), callsB.Load(), "the new runner did only the steps left")
	close(block)
}

// A runner that takes over a job of a kind it does not know (a job started
// by another version during a rollout) fails the job with an error naming
// the kind, and keeps running. Fails if the takeover calls a step that is
// not there, which panics and takes the whole process down.
func TestJobOfAKindTheRunnerDoesNotKnowFailsWithAClearError(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	var id int64
	require.NoError(t, s.Pool.QueryRow(context.Background(), `
INSERT INTO ops_job (kind, params, runner, lease_until)
VALUES ('reindex_v9', '{}', 'a runner of another version, gone', now() - interval '1 minute')
RETURNING id`).Scan(&id))

	var calls atomic.Int64
	r := job.New(s.Pool, slog.New(slog.DiscardHandler), job.Config{Resume: 20 * time.Millisecond,
		Steps: map[string]job.Step{"count": counter(2, &calls, nil)}})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	j := waitStatus(t, r, id, job.StatusFailed)
	require.NotNil(t, j.Error)
	require.Contains(t, *j.Error, `"reindex_v9"`)
	require.Contains(t, *j.Error, job.ErrUnknownKind.Error())
	require.NotNil(t, j.FinishedAt)

	// The runner still works the kinds it knows.
	k, err := r.Start(t.Context(), "count", nil)
	require.NoError(t, err)
	waitStatus(t, r, k.ID, job.StatusDone)
	stop()
	require.NoError(t, <-done)
}

// A cancelled job stops at its next step boundary: the step under way
// finishes and is recorded, no further step runs, and the job says what it
// did before it stopped.
func TestCancelledJobStopsAtItsNextStepAndReportsWhatItDid(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	block := make(chan struct{})
	var calls atomic.Int64
	r := job.New(s.Pool, slog.New(slog.DiscardHandler), job.Config{Steps: map[string]job.Step{"count": counter(100, &calls, block)}})
	j, err := r.Start(t.Context(), "count", nil)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return calls.Load() == 2 }, 10*time.Second, 10*time.Millisecond, "second step started")

	c, err := job.Cancel(t.Context(), s.Pool, j.ID)
	require.NoError(t, err)
	require.True(t, c.CancelRequested)
	require.Equal(t, job.StatusRunning, c.Status, "the step under way is not interrupted")
	close(block) // the second step ends; the runner must not start a third
	j = waitStatus(t, r, j.ID, job.StatusCanceled)
	r.Wait()
	require.Equal(t, int64(2), j.Progress["counted"], "the step under way was recorded")
	require.Equal(t, int64(2), calls.Load(), "no step ran after the cancel")
	require.NotNil(t, j.FinishedAt)

	_, err = job.Cancel(t.Context(), s.Pool, j.ID)
	require.ErrorIs(t, err, job.ErrFinished, "a finished job cannot be cancelled")
	_, err = job.Cancel(t.Context(), s.Pool, j.ID+1000)
	require.ErrorIs(t, err, job.ErrNotFound)
}
