package action_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/action"
)

// A dead change blocks its resource; skipping it (never sending it) lets
// the next changes of the resource go out, one after the other in their
// order. Fails if skipped counts as unsettled in the ordered claim's probe,
// or if a skipped action can be claimed.
func TestSkippedDeadChangeUnblocksTheNextChangesInOrder(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	keys := recordStreams(t, s.Pool, 1, 3)["subscription/sub_0"]
	l := action.Lease{For: time.Minute, MaxAttempts: 5, SenderID: "s"}
	claimOne := func() []action.Claimed {
		t.Helper()
		cs, err := action.ClaimOrdered(ctx, s.Pool, orderedKind, 10, l)
		require.NoError(t, err)
		return cs
	}
	first := claimOne()
	require.Len(t, first, 1)
	_, err := action.Settle(ctx, s.Pool, first[0], action.Outcome{Status: action.StatusDead, Error: "HTTP 400"}, l.MaxAttempts)
	require.NoError(t, err)
	require.Empty(t, claimOne(), "the dead change blocks its resource")

	require.ErrorIs(t, action.Skip(ctx, s.Pool, keys[1], "not dead"), action.ErrNotDead, "a pending change is not skipped")
	require.NoError(t, action.Skip(ctx, s.Pool, keys[0], "receiver rejects v1 for good"))
	require.ErrorIs(t, action.Skip(ctx, s.Pool, keys[0], ""), action.ErrNotDead, "skipped is final")
	require.ErrorIs(t, action.ReplayDead(ctx, s.Pool, keys[0]), action.ErrNotDead, "a skipped change is never sent")

	var order []string
	for range 2 {
		cs := claimOne()
		require.Len(t, cs, 1, "one change of the resource at a time")
		order = append(order, cs[0].Key.SubjectID)
		_, err := action.Settle(ctx, s.Pool, cs[0], action.Outcome{Status: action.StatusSent}, l.MaxAttempts)
		require.NoError(t, err)
	}
	require.Equal(t, []string{keys[1].SubjectID, keys[2].SubjectID}, order)
	require.Empty(t, claimOne())

	sh, err := action.Show(ctx, s.Pool, keys[0], nil)
	require.NoError(t, err)
	require.Equal(t, action.StatusSkipped, sh.Action.Status)
	require.Equal(t, 1, sh.Action.Attempts, "skipping sends nothing")
	require.Contains(t, sh.Action.LastError, "receiver rejects v1 for good")
	require.Contains(t, sh.Action.LastError, "HTTP 400", "the attempts' error stays")
	require.NotNil(t, sh.Action.DoneAt)

	open, err := action.CountOpen(ctx, s.Pool)
	require.NoError(t, err)
	require.Empty(t, open, "a skipped action is not open")

	err = action.Skip(ctx, s.Pool, action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: "nope", Kind: orderedKind}, "")
	require.ErrorIs(t, err, action.ErrNotFound)
}

// A skip and a replay of one dead action, run at once (by two operators),
// end in exactly one outcome: either the action is skipped and the replay
// refused, or it is pending again and the skip refused; never both, never
// neither. 40 dead actions, each raced by a skip and a replay from their
// own goroutines. Fails if either statement stops checking the status
// inside its update.
func TestConcurrentSkipAndReplayEndInExactlyOneOutcome(t *testing.T) {
	t.Parallel()
	s := dbtest.NewWithConns(t, 16)
	ctx := context.Background()
	const n = 40
	streams := recordStreams(t, s.Pool, n, 1)
	_, err := s.Pool.Exec(ctx, `UPDATE action SET status = 'dead', done_at = now(), attempts = 3, last_error = 'HTTP 400'`)
	require.NoError(t, err)

	type result struct{ skipErr, replayErr error }
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		k := streams[fmt.Sprintf("subscription/sub_%d", i)][0]
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			results[i].skipErr = action.Skip(ctx, s.Pool, k, "race")
		}()
		go func() {
			defer wg.Done()
			<-start
			results[i].replayErr = action.ReplayDead(ctx, s.Pool, k)
		}()
	}
	close(start)
	wg.Wait()

	skipped, replayed := 0, 0
	for i, r := range results {
		k := streams[fmt.Sprintf("subscription/sub_%d", i)][0]
		sh, err := action.Show(ctx, s.Pool, k, nil)
		require.NoError(t, err)
		switch {
		case r.skipErr == nil && errors.Is(r.replayErr, action.ErrNotDead):
			skipped++
			require.Equal(t, action.StatusSkipped, sh.Action.Status, k.SubjectID)
		case r.replayErr == nil && errors.Is(r.skipErr, action.ErrNotDead):
			replayed++
			require.Equal(t, action.StatusPending, sh.Action.Status, k.SubjectID)
		default:
			t.Fatalf("%s: skip %v, replay %v, status %s: not exactly one outcome", k.SubjectID, r.skipErr, r.replayErr, sh.Action.Status)
		}
	}
	require.Equal(t, n, skipped+replayed)
	t.Logf("skipped %d, replayed %d", skipped, replayed)
}
