package projection_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
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
				EventID: "ev_f", Generation: 1}, startFetch(t, s), &prev)
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

func (a applier) fetched(r message.Resource, status string) {
	a.t.Helper()
	var prev string
	require.NoError(a.t, pgx.BeginFunc(context.Background(), a.s.Pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		projection.QueueFetched(b, projection.Write{Resource: r, State: []byte(fmt.Sprintf(`{"status":%q}`, status)),
			Status: status, EventID: "ev_fetched_" + status, Generation: 1}, startFetch(a.t, a.s), &prev)
		return tx.SendBatch(context.Background(), b).Close()
	}))
}

// A deletion carrying the same version as the current snapshot (Chargebee's
// subscription_deleted repeats the last resource_version) is the later of
// the two: it wins and writes the tombstone. Repeating it is a duplicate, and
// the active snapshot of that version arriving after it is stale, not a
// duplicate: the duplicate check compares deleted as well as content. Fails
// if an equal-version deletion is dropped as duplicate/conflict again.
func TestDeletionAtEqualVersionWinsAndWritesTombstone(t *testing.T) {
	t.Parallel()
	a := applier{t, dbtest.New(t)}
	r := res("sub_del_eq")

	active := snap(r, 7, "active")
	require.Equal(t, projection.Applied, a.apply(active))
	del := active // same version, same content: only deleted differs
	del.Deleted, del.EventID = true, "ev_deleted"
	require.Equal(t, projection.Applied, a.apply(del), "an equal-version deletion wins")
	p := a.get(r)
	require.True(t, p.Deleted, "tombstone written")
	require.Equal(t, int64(7), *p.Version)
	require.Equal(t, "ev_deleted", p.SourceEventID)
	require.False(t, p.NeedsReconcile)

	require.Equal(t, projection.Duplicate, a.apply(del), "the same deletion again")
	require.Equal(t, projection.Stale, a.apply(active), "the active snapshot of the deleted version came before the deletion")
	other := snap(r, 7, "past_due")
	require.Equal(t, projection.Stale, a.apply(other), "no snapshot of the deleted version reopens it")
	require.True(t, a.get(r).Deleted)
	require.False(t, a.get(r).NeedsReconcile)
}

// Two different snapshots with one version: the first stays, and the write
// says so — recorded as a conflict, the projection parked with
// needs_reconcile and a reason, so a check (or an operator, through
// `hookyard parked list`) resolves it. Fails if a conflict leaves no mark.
func TestEqualVersionConflictParksProjectionForReconcile(t *testing.T) {
	t.Parallel()
	a := applier{t, dbtest.New(t)}
	r := res("sub_conflict")

	require.Equal(t, projection.Applied, a.apply(snap(r, 20, "past_due")))
	require.False(t, a.get(r).NeedsReconcile)
	require.Equal(t, projection.Duplicate, a.apply(snap(r, 20, "past_due")), "same content is no conflict")
	require.False(t, a.get(r).NeedsReconcile)
	other := snap(r, 20, "active")
	other.EventID = "ev_other"
	require.Equal(t, projection.Conflict, a.apply(other))
	p := a.get(r)
	require.Equal(t, "past_due", p.Status, "the first snapshot stays")
	require.Equal(t, "ev_20_past_due", p.SourceEventID)
	require.True(t, p.NeedsReconcile, "a conflict parks the projection")
	require.Contains(t, p.NeedsReconcileReason, "conflict")
	require.NotNil(t, p.ParkedAt)

	// Key order and spacing are not content: jsonb compares normalized.
	same := snap(r, 20, "past_due")
	same.State = []byte(`{ "v": 20, "status": "past_due" }`)
	require.Equal(t, projection.Duplicate, a.apply(same))

	// While it waits, another conflicting copy (a replay) updates the
	// reason but is the same parking: the check already sent stands.
	_, err := a.s.Pool.Exec(context.Background(), `UPDATE projection SET reconcile_checked_at = now() - interval '1 minute'`)
	require.NoError(t, err)
	again := snap(r, 20, "canceled")
	again.EventID = "ev_third"
	require.Equal(t, projection.Conflict, a.apply(again))
	p2 := a.get(r)
	require.Contains(t, p2.NeedsReconcileReason, "ev_third")
	require.Equal(t, *p.ParkedAt, *p2.ParkedAt)
	require.NotNil(t, p2.ReconcileCheckedAt, "parked once: no new check for the same parking")

	// A newer version resolves it.
	require.Equal(t, projection.Applied, a.apply(snap(r, 21, "active")))
	p = a.get(r)
	require.False(t, p.NeedsReconcile)
	require.Empty(t, p.NeedsReconcileReason)
	require.Nil(t, p.ParkedAt)
	require.Nil(t, p.ReconcileCheckedAt)
}

// A provider with both paths (a Standard Webhooks sender whose events carry
// a version or not) can have a projection fetched from its API: no version,
// so no snapshot can be ordered against it. A versioned write never
// overwrites it: it is recorded as unordered and the projection is parked,
// so a check fetches the provider's current state. Fails if a versioned
// snapshot (however old) replaces a fetched row again.
func TestVersionedWriteNeverOverwritesFetchedProjection(t *testing.T) {
	t.Parallel()
	a := applier{t, dbtest.New(t)}
	r := res("sub_fetched")

	a.fetched(r, "canceled")
	require.Equal(t, projection.Unordered, a.apply(snap(r, 1, "active")))
	p := a.get(r)
	require.Nil(t, p.Version, "still the fetched row")
	require.Equal(t, "canceled", p.Status)
	require.Equal(t, "ev_fetched_canceled", p.SourceEventID)
	require.True(t, p.NeedsReconcile)
	require.Contains(t, p.NeedsReconcileReason, "unordered")

	inc := snap(r, 2, "active")
	inc.Incremental = true
	require.Equal(t, projection.Unordered, a.apply(inc), "incremental endpoints too")
	require.Equal(t, "canceled", a.get(r).Status)

	// The check's fetch writes the provider's state and unparks it.
	a.fetched(r, "active")
	p = a.get(r)
	require.Equal(t, "active", p.Status)
	require.False(t, p.NeedsReconcile)
	require.Empty(t, p.NeedsReconcileReason)
}

// The tombstone protects against older snapshots only: a resource the
// provider reactivated (a newer version after the deletion) comes back.
// Fails if the protection turns into a resource that can never return.
func TestReactivationWithHigherVersionAfterTombstoneApplies(t *testing.T) {
	t.Parallel()
	a := applier{t, dbtest.New(t)}
	r := res("sub_reactivated")

	require.Equal(t, projection.Applied, a.apply(snap(r, 1, "active")))
	del := snap(r, 2, "cancelled")
	del.Deleted = true
	require.Equal(t, projection.Applied, a.apply(del))
	require.Equal(t, projection.Stale, a.apply(snap(r, 1, "active")))
	require.Equal(t, projection.Applied, a.apply(snap(r, 3, "active")), "reactivated")
	p := a.get(r)
	require.False(t, p.Deleted)
	require.Equal(t, "active", p.Status)
	require.Equal(t, int64(3), *p.Version)

	inc := snap(r, 4, "cancelled")
	inc.Deleted, inc.Incremental = true, true
	require.Equal(t, projection.Applied, a.apply(inc))
	inc = snap(r, 5, "active")
	inc.Incremental = true
	require.Equal(t, projection.Applied, a.apply(inc), "reactivated on an incremental endpoint")
	require.False(t, a.get(r).Deleted)
}

// The table's old name stays readable: subscription_projection is a view of
// projection with every resource type and the same columns, so a reader of
// the old contract sees a customer's row as the new table has it. Fails if
// the compatibility view is dropped, filtered to subscriptions or left
// with fewer columns.
func TestOldTableNameReadsEveryTypeWithTheSameColumns(t *testing.T) {
	t.Parallel()
	a := applier{t, dbtest.New(t)}
	cus := message.Resource{Provider: "chargebee", SourceAccount: "site", Environment: "test", Type: "customer", ID: "cus_1"}
	require.Equal(t, projection.Applied, a.apply(snap(res("sub_1"), 5, "active")))
	require.Equal(t, projection.Applied, a.apply(snap(cus, 7, "")))

	ctx := context.Background()
	cols := func(table string) []string {
		rows, err := a.s.Pool.Query(ctx, `SELECT column_name::text FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position`, table)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	require.NotEmpty(t, cols("projection"))
	require.Equal(t, cols("projection"), cols("subscription_projection"))

	rows, err := a.s.Pool.Query(ctx, `SELECT resource_type || ':' || provider_version FROM subscription_projection ORDER BY resource_type`)
	require.NoError(t, err)
	types, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"customer:7", "subscription:5"}, types)
}
