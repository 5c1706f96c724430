package projection_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/dbtest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
)

func res(id string) message.Resource {
	return message.Resource{Provider: "chargebee", SourceAccount: "site", Environment: "test", Type: "subscription", ID: id}
}

type applier struct {
	t *testing.T
	s *dbtest.Schema
}

func (a applier) apply(w projection.Write) string {
	a.t.Helper()
	var out string
	err := pgx.BeginFunc(context.Background(), a.s.Pool, func(tx pgx.Tx) error {
		var err error
		out, err = projection.ApplyVersioned(context.Background(), tx, w)
		return err
	})
	require.NoError(a.t, err)
	return out
}

func (a applier) get(r message.Resource) projection.Projection {
	a.t.Helper()
	p, err := projection.Get(context.Background(), a.s.Pool, r)
	require.NoError(a.t, err)
	return p
}

func snap(r message.Resource, v int64, status string) projection.Write {
	return projection.Write{Resource: r, Version: &v, State: []byte(fmt.Sprintf(`{"status":%q,"v":%d}`, status, v)),
		Status: status, EventID: fmt.Sprintf("ev_%d_%s", v, status), Generation: 1}
}

// Invariant 4: a projection only moves forward. Each outcome fails if the
// version comparison inside the upsert (WHERE EXCLUDED.version > current) or
// the classification of what happened is removed.
func TestVersionedWriteOnlyMovesForward(t *testing.T) {
	t.Parallel()
	a := applier{t, dbtest.New(t)}
	r := res("sub_fwd")

	require.Equal(t, projection.Applied, a.apply(snap(r, 10, "active")), "first write inserts")
	require.Equal(t, projection.Applied, a.apply(snap(r, 20, "past_due")), "higher version applies")
	require.Equal(t, projection.Stale, a.apply(snap(r, 15, "active")), "lower version is stale")
	p := a.get(r)
	require.Equal(t, int64(20), *p.Version)
	require.Equal(t, "past_due", p.Status)
	require.Equal(t, "ev_20_past_due", p.SourceEventID)

	require.Equal(t, projection.Duplicate, a.apply(snap(r, 20, "past_due")), "same version and content is a duplicate")
	conflicting := snap(r, 20, "active")
	conflicting.EventID = "ev_other"
	require.Equal(t, projection.Conflict, a.apply(conflicting), "same version, other content is a conflict")
	p = a.get(r)
	require.Equal(t, int64(20), *p.Version)
	require.Equal(t, "past_due", p.Status, "a conflict must not overwrite the projection")
	require.Equal(t, "ev_20_past_due", p.SourceEventID)
}

// Invariant 4 for delta-carrying endpoints: a skipped version is not applied
// and the resource is marked for reconciliation. Fails if the incremental
// guard or the gap CTE is removed.
func TestIncrementalGapParksAndMarksReconcile(t *testing.T) {
	t.Parallel()
	a := applier{t, dbtest.New(t)}
	r := res("sub_inc")
	inc := func(v int64) projection.Write { w := snap(r, v, "active"); w.Incremental = true; return w }

	require.Equal(t, projection.Applied, a.apply(inc(1)))
	require.Equal(t, projection.Gap, a.apply(inc(3)), "version 3 after 1 skips 2")
	p := a.get(r)
	require.Equal(t, int64(1), *p.Version)
	require.True(t, p.NeedsReconcile)

	require.Equal(t, projection.Applied, a.apply(inc(2)), "the next version in sequence applies")
	require.Equal(t, int64(2), *a.get(r).Version)
	require.Equal(t, projection.Stale, a.apply(inc(1)))
}

// Invariant 4: a deletion leaves a tombstone with its version; an older
// snapshot arriving later does not resurrect the resource. Fails if deletion
// removes the row or the tombstone loses its version.
func TestTombstoneStaysAgainstOlderSnapshot(t *testing.T) {
	t.Parallel()
	a := applier{t, dbtest.New(t)}
	r := res("sub_tomb")

	require.Equal(t, projection.Applied, a.apply(snap(r, 100, "active")))
	del := snap(r, 300, "cancelled")
	del.Deleted = true
	require.Equal(t, projection.Applied, a.apply(del))
	require.Equal(t, projection.Stale, a.apply(snap(r, 250, "active")))

	p := a.get(r)
	require.True(t, p.Deleted)
	require.Equal(t, int64(300), *p.Version)
	require.Equal(t, "cancelled", p.Status)

	// A tombstone for a resource never seen still records its version.
	gone := res("sub_never_seen")
	del = snap(gone, 50, "cancelled")
	del.Deleted = true
	require.Equal(t, projection.Applied, a.apply(del))
	require.Equal(t, projection.Stale, a.apply(snap(gone, 40, "active")))
	require.True(t, a.get(gone).Deleted)
}

// Invariant 4 under concurrency: the compare is inside the write, so however
// 50 concurrent transactions interleave, the highest version wins. A
// read-then-write compare would let a lower version overwrite a higher one
// that committed in between.
func TestConcurrentVersionedWritesKeepHighest(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	r := res("sub_race")
	ctx := context.Background()

	versions := rand.Perm(50)
	var wg sync.WaitGroup
	errs := make(chan error, len(versions))
	start := make(chan struct{})
	for _, i := range versions {
		v := int64(i + 1)
		wg.Go(func() {
			<-start
			errs <- pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
				_, err := projection.ApplyVersioned(ctx, tx, snap(r, v, fmt.Sprintf("s%d", v)))
				return err
			})
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	p, err := projection.Get(ctx, s.Pool, r)
	require.NoError(t, err)
	require.Equal(t, int64(50), *p.Version)
	require.Equal(t, "s50", p.Status)
	require.JSONEq(t, `{"status":"s50","v":50}`, string(p.State))
}

// Every write says what it found, and the history keeps it, so a timeline
// reads "active → canceled" and a check can tell a divergence from a
// projection in sync. Fails if either write stops reading back the state it
// replaced, if tombstones and "no projection" are not told apart, or if
// the history drops the previous state.
func TestWritesSayWhatTheyReplaced(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	r := res("sub_prev")
	send := func(queue func(b *pgx.Batch)) {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			queue(b)
			return tx.SendBatch(ctx, b).Close()
		}))
	}
	versioned := func(w projection.Write) projection.Result {
		t.Helper()
		var res projection.Result
		send(func(b *pgx.Batch) { projection.QueueVersioned(b, w, &res) })
		return res
	}
	fetched := func(status string, deleted bool) string {
		t.Helper()
		prev := "not read"
		send(func(b *pgx.Batch) {
			projection.QueueFetched(b, projection.Write{Resource: r, State: []byte(`{}`), Status: status, Deleted: deleted,
				EventID: "ev_f", Generation: 1}, time.Now(), &prev)
		})
		return prev
	}

	require.Equal(t, projection.Result{Outcome: projection.Applied, Previous: ""}, versioned(snap(r, 1, "active")), "nothing before")
	require.Equal(t, projection.Result{Outcome: projection.Stale, Previous: "active"}, versioned(snap(r, 0, "trialing")))
	del := snap(r, 2, "cancelled")
	del.Deleted = true
	require.Equal(t, projection.Result{Outcome: projection.Applied, Previous: "active"}, versioned(del))
	require.Equal(t, "deleted", fetched("", false), "a tombstone is not \"no projection\"")
	require.Equal(t, "unknown", fetched("active", false), "a projection without status")
	require.Equal(t, "active", fetched("active", false))
	other := res("sub_prev_fetched_first")
	r = other
	require.Equal(t, "", fetched("active", false))

	require.Equal(t, projection.Missing, projection.Finding("", "active", false))
	require.Equal(t, projection.InSync, projection.Finding("active", "active", false))
	require.Equal(t, projection.InSync, projection.Finding("deleted", "canceled", true))
	require.Equal(t, projection.Diverged, projection.Finding("active", "canceled", true))

	prev := "past_due"
	send(func(b *pgx.Batch) {
		projection.QueueHistory(b, []projection.HistoryEntry{
			{Resource: r, EventID: "ev_h", Outcome: projection.Fetched, Status: "canceled", Deleted: true, Previous: &prev, Generation: 1},
			{Resource: r, EventID: "ev_fail", Outcome: projection.FetchFailed, Detail: "boom", Generation: 1},
		})
	})
	h, err := projection.History(ctx, s.Pool, r, 10)
	require.NoError(t, err)
	require.Len(t, h, 2)
	require.Equal(t, "ev_fail", h[0].EventID)
	require.Nil(t, h[0].Previous, "no write, nothing found")
	require.Equal(t, "past_due", *h[1].Previous)
	require.True(t, h[1].Deleted)
	require.Greater(t, h[0].ID, h[1].ID)
}
