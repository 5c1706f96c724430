package inbox_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// A list read page by page shows every event of its status that the filter
// selects exactly once, in the index's order, even when more events than a
// page, and more than a page's scan budget, share one instant (a replay
// re-publishes a whole chunk at one now()), and when the filter matches so
// few that pages come back short.
func TestWaitingListPagesShowEveryMatchOnceWhenManyShareAnInstant(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	var recs []*inbox.Record
	for i := range 40 {
		recs = append(recs, recordOn(endpoint, fmt.Sprintf("evt_%02d", i), "customer.subscription.updated", "sub_1"))
		recs = append(recs, recordOn(otherEndpoint, fmt.Sprintf("cb_%02d", i), "subscription_changed", "cb_sub"))
	}
	insert(t, s.Pool, recs...)
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	// Ten instants of four stripe and four chargebee events each, then
	// one instant shared by 16 stripe events and 16 chargebee ones.
	exec(t, s.Pool, `UPDATE webhook_inbox SET next_attempt_at = $1::timestamptz + least(substr(event_id, 5)::int / 4, 10) * interval '1 second'`, t0)
	exec(t, s.Pool, `UPDATE webhook_inbox SET status = 'processed' WHERE event_id IN ('evt_07', 'cb_33')`)

	var want []string
	for i := range 40 {
		if i != 7 {
			want = append(want, fmt.Sprintf("evt_%02d", i))
		}
	}
	for _, tc := range []struct {
		name  string
		f     inbox.ListFilter
		want  []string
		pages int
	}{
		{"one provider", inbox.ListFilter{Status: "pending", Provider: endpoint.Provider, Limit: 3, Scan: 5}, want, 0},
		{"every provider", inbox.ListFilter{Status: "pending", Limit: 7, Scan: 4}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			seen := map[string]bool{}
			f := tc.f
			for page := 0; ; page++ {
				require.Less(t, page, 100, "the list ends")
				p, err := inbox.ListWaiting(t.Context(), s.Pool, f)
				require.NoError(t, err)
				require.LessOrEqual(t, len(p.Rows), f.Limit)
				for _, r := range p.Rows {
					require.False(t, seen[r.EventID], "%s shown twice", r.EventID)
					seen[r.EventID] = true
					require.Equal(t, "pending", r.Status)
					got = append(got, r.EventID)
				}
				if p.Next == nil {
					break
				}
				f.After = p.Next
			}
			if tc.want != nil {
				require.Equal(t, tc.want, sorted(got, "evt_"), "every match, once")
			} else {
				require.Len(t, got, 78, "every pending event, once")
			}
		})
	}
}

func sorted(ids []string, prefix string) []string {
	out := make([]string, 0, len(ids))
	for i := range 40 {
		id := fmt.Sprintf("%s%02d", prefix, i)
		for _, g := range ids {
			if g == id {
				out = append(out, id)
			}
		}
	}
	return out
}

// The overview's counts stop at their cap and say so; below it they are
// exact.
func TestBacklogCountsAreExactUpToTheCapAndSayWhenCapped(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	var recs []*inbox.Record
	for i := range 7 {
		recs = append(recs, recordOn(endpoint, fmt.Sprintf("evt_%d", i), "customer.subscription.updated", "sub_1"))
	}
	insert(t, s.Pool, recs...)
	kill(t, s.Pool, time.Now().Add(-time.Hour), "evt_0", "evt_1")
	exec(t, s.Pool, `UPDATE webhook_inbox SET status = 'retrying', next_attempt_at = now() - interval '1 minute' WHERE event_id = 'evt_2'`)
	got, err := inbox.CountBacklogCapped(t.Context(), s.Pool, 3)
	require.NoError(t, err)
	by := map[string]inbox.CappedBacklog{}
	for _, b := range got {
		by[b.Status] = b
	}
	require.Equal(t, int64(3), by["pending"].Count)
	require.True(t, by["pending"].Capped, "4 pending, capped at 3")
	require.Equal(t, int64(2), by["dead"].Count)
	require.False(t, by["dead"].Capped)
	require.Equal(t, int64(1), by["retrying"].Count)
	require.NotNil(t, by["retrying"].First)
	require.True(t, by["retrying"].First.Before(time.Now()), "the next attempt is overdue")
}

// "Retry now", pressed by many operators at once (or racing the retry
// scheduler), enqueues a retrying event once: one publication, attempts
// kept; every other press learns the event is no longer retrying.
func TestRetryNowEnqueuesOnceUnderConcurrentPresses(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	insert(t, s.Pool, recordOn(endpoint, "evt_r", "customer.subscription.updated", "sub_1"))
	exec(t, s.Pool, `DELETE FROM outbox`)
	exec(t, s.Pool, `UPDATE webhook_inbox SET status = 'retrying', attempts = 3, next_attempt_at = now() + interval '1 hour' WHERE event_id = 'evt_r'`)
	k := inbox.Key{Provider: endpoint.Provider, SourceAccount: endpoint.SourceAccount, Environment: endpoint.Environment, EventID: "evt_r"}
	const presses = 16
	var wg sync.WaitGroup
	errs := make(chan error, presses)
	for range presses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- inbox.RetryNow(t.Context(), s.Pool, k)
		}()
	}
	wg.Wait()
	close(errs)
	ok := 0
	for err := range errs {
		if err == nil {
			ok++
			continue
		}
		require.True(t, errors.Is(err, inbox.ErrNotRetrying), "%v", err)
	}
	require.Equal(t, 1, ok)
	var n int
	require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM outbox`).Scan(&n))
	require.Equal(t, 1, n, "one publication")
	row, err := inbox.Get(t.Context(), s.Pool, k, false)
	require.NoError(t, err)
	require.Equal(t, "pending", row.Status)
	require.Equal(t, 3, row.Attempts, "a retry keeps its attempts")

	require.ErrorIs(t, inbox.RetryNow(t.Context(), s.Pool, k), inbox.ErrNotRetrying)
	k.EventID = "evt_none"
	require.ErrorIs(t, inbox.RetryNow(t.Context(), s.Pool, k), inbox.ErrNotFound)
}
