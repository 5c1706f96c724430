package projection_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

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
