package projection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/schemas"
)

const changesTopic = "hookyard.changes"

// changeRows reads the change records the outbox holds for r, in id order.
func changeRows(t *testing.T, s *dbtest.Schema, r message.Resource) []message.Change {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(),
		`SELECT message, topic FROM outbox WHERE message_key = $1 AND topic IS NOT NULL ORDER BY id`, r.Key())
	require.NoError(t, err)
	var out []message.Change
	sch := compileChangeSchema(t)
	for rows.Next() {
		var msg, topic string
		require.NoError(t, rows.Scan(&msg, &topic))
		require.Equal(t, changesTopic, topic)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(msg)))
		require.NoError(t, err)
		require.NoError(t, sch.Validate(v), "%s", msg)
		c, err := message.DecodeChange([]byte(msg))
		require.NoError(t, err, "%s", msg)
		out = append(out, c)
	}
	require.NoError(t, rows.Err())
	return out
}

func compileChangeSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	const url = "https://hookyard.dev/schemas/change.schema.json"
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.ChangeSchema))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	require.NoError(t, c.AddResource(url, doc))
	sch, err := c.Compile(url)
	require.NoError(t, err)
	return sch
}

// inTx runs the writes queue queues in one transaction, then inserts the
// change records of those given c, as the processor does.
func inTx(t *testing.T, s *dbtest.Schema, queue func(b *pgx.Batch, c *projection.Changes)) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		b, c := &pgx.Batch{}, projection.NewChanges(changesTopic)
		queue(b, c)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		return c.Insert(ctx, tx)
	}))
}

// Every write that moved a projection queues, in its own statement, the
// change record of the row as stored, valid under
// schemas/change.schema.json; a write that changed nothing (stale,
// duplicate, conflict, a fetch that found the stored state) queues none.
// Fails without the change CTE, with one that ignores the write's decision,
// or with a record the schema or message.Change does not describe.
func TestOnlyWritesThatChangedAProjectionQueueAChangeRecord(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	r := res("sub_changes")
	versioned := func(w projection.Write) string {
		t.Helper()
		var out projection.Result
		inTx(t, s, func(b *pgx.Batch, c *projection.Changes) { w.Changes = c; projection.QueueVersioned(b, w, &out) })
		return out.Outcome
	}
	require.Equal(t, projection.Applied, versioned(snap(r, 10, "active")))
	require.Equal(t, projection.Stale, versioned(snap(r, 9, "trialing")))
	require.Equal(t, projection.Duplicate, versioned(snap(r, 10, "active")))
	conflict := snap(r, 10, "active")
	conflict.State = []byte(`{"status":"active","other":true}`)
	require.Equal(t, projection.Conflict, versioned(conflict))
	del := snap(r, 11, "cancelled")
	del.Deleted = true
	require.Equal(t, projection.Applied, versioned(del))

	got := changeRows(t, s, r)
	require.Len(t, got, 2, "only the two applied writes have records")
	require.Equal(t, message.DecisionApplied, got[0].Decision)
	require.Equal(t, int64(10), *got[0].Version)
	require.Equal(t, "active", got[0].Status)
	require.JSONEq(t, `{"status":"active","v":10}`, string(got[0].State))
	require.Equal(t, "ev_10_active", got[0].EventID)
	require.Equal(t, int64(1), got[0].FenceGeneration)
	require.Nil(t, got[0].FetchSeq)
	require.True(t, got[1].Deleted, "the tombstone is a record")
	require.Equal(t, int64(11), *got[1].Version)
	stored, err := projection.Get(context.Background(), s.Pool, r)
	require.NoError(t, err)
	require.Equal(t, stored.UpdatedAt, got[1].ChangedAt.In(stored.UpdatedAt.Location()))

	// Fetched state: a record when it differs from the stored state, none
	// when the provider still has what is stored, none when stale.
	f := res("sub_changes_fetched")
	fetched := func(status string, start projection.FetchStart) string {
		t.Helper()
		var out projection.Result
		inTx(t, s, func(b *pgx.Batch, c *projection.Changes) {
			projection.QueueFetchedResult(b, projection.Write{Resource: f, State: []byte(fmt.Sprintf(`{"status":%q}`, status)),
				Status: status, EventID: "ev_f_" + status, Generation: 2, Changes: c}, start, &out)
		})
		return out.Outcome
	}
	old := startFetch(t, s)
	require.Equal(t, projection.Fetched, fetched("active", startFetch(t, s)))
	require.Equal(t, projection.Fetched, fetched("active", startFetch(t, s)), "written (a later observation), no change")
	require.Equal(t, projection.Stale, fetched("past_due", old))
	last := startFetch(t, s)
	require.Equal(t, projection.Fetched, fetched("canceled", last))
	got = changeRows(t, s, f)
	require.Len(t, got, 2, "%+v", got)
	require.Equal(t, message.DecisionFetched, got[0].Decision)
	require.Equal(t, "active", got[0].Status)
	require.Nil(t, got[0].Version)
	require.Equal(t, "canceled", got[1].Status)
	require.Equal(t, last.Seq, *got[1].FetchSeq)
	require.NotNil(t, got[1].FetchedAt)
	require.Less(t, *got[0].FetchSeq, *got[1].FetchSeq)

	// No topic, no record: callers that publish no changes.
	none := res("sub_no_topic")
	v := int64(1)
	var out projection.Result
	inTx(t, s, func(b *pgx.Batch, _ *projection.Changes) {
		projection.QueueVersioned(b, projection.Write{Resource: none, Version: &v, State: []byte(`{}`), Generation: 1}, &out)
	})
	require.Equal(t, projection.Applied, out.Outcome)
	require.Empty(t, changeRows(t, s, none))
}

// A fetched write compares with the row as it is when written, not as its
// statement's snapshot had it: two writers of one resource (a key that moved
// partitions) race, and whatever order they commit in, the last change
// record of the resource is the state the projection holds. Fails if the
// fetched write compares with its snapshot (the old CTE without FOR UPDATE):
// the later fetch of the state the snapshot showed writes no record, and the
// stream ends on the other writer's state.
func TestRacingFetchedWritesEndTheStreamOnTheStoredState(t *testing.T) {
	t.Parallel()
	s := dbtest.NewWithConns(t, 8)
	ctx := context.Background()
	for i := range 20 {
		f := res(fmt.Sprintf("sub_race_%d", i))
		write := func(status string, start projection.FetchStart) {
			var out projection.Result
			inTx(t, s, func(b *pgx.Batch, c *projection.Changes) {
				projection.QueueFetchedResult(b, projection.Write{Resource: f, State: []byte(fmt.Sprintf(`{"status":%q}`, status)),
					Status: status, Generation: 1, Changes: c}, start, &out)
			})
		}
		write("active", startFetch(t, s))
		// b's snapshot may still show "active" while a's "canceled" commits;
		// b writes "active" again with a later fetch number.
		sa, sb := startFetch(t, s), startFetch(t, s)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); write("canceled", sa) }()
		go func() { defer wg.Done(); write("active", sb) }()
		wg.Wait()
		stored, err := projection.Get(ctx, s.Pool, f)
		require.NoError(t, err)
		got := changeRows(t, s, f)
		require.NotEmpty(t, got)
		require.Equal(t, stored.Status, got[len(got)-1].Status, "%s: the stream ends on another state than the projection's", f.ID)
		var st map[string]any
		require.NoError(t, json.Unmarshal(got[len(got)-1].State, &st))
		require.Equal(t, stored.Status, st["status"])
	}
}

// Republish queues one record of every projection, as stored, in batches
// that walk the primary key: a consumer of a topic that started after the
// projections did gets every one of them. Fails if a batch boundary skips
// or repeats a projection.
func TestRepublishQueuesEveryProjectionOnce(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	var want []string
	for i := range 25 {
		r := res(fmt.Sprintf("sub_rep_%02d", i))
		if i%5 == 0 {
			r.SourceAccount = "other"
		}
		w := snap(r, int64(i+1), "active")
		var out projection.Result
		inTx(t, s, func(b *pgx.Batch, _ *projection.Changes) { projection.QueueVersioned(b, w, &out) }) // no Changes: no record
		want = append(want, r.Key())
	}
	var calls int
	n, err := projection.Republish(ctx, s.Pool, changesTopic, 7, func(int64) { calls++ })
	require.NoError(t, err)
	require.Equal(t, int64(25), n)
	require.Equal(t, 4, calls)
	var got []string
	for _, k := range want {
		parts := strings.Split(k, "/")
		r := message.Resource{Provider: parts[0], SourceAccount: parts[1], Environment: parts[2], Type: parts[3], ID: parts[4]}
		cs := changeRows(t, s, r)
		require.Len(t, cs, 1, k)
		require.Equal(t, message.DecisionCurrent, cs[0].Decision)
		stored, err := projection.Get(ctx, s.Pool, r)
		require.NoError(t, err)
		require.Equal(t, stored.Version, cs[0].Version)
		require.JSONEq(t, string(stored.State), string(cs[0].State))
		got = append(got, k)
	}
	require.ElementsMatch(t, want, got)
	_, err = projection.Republish(ctx, s.Pool, "", 0, nil)
	require.Error(t, err)
}

// The change records of one transaction's writes reach the outbox in the
// order of the writes, one resource written several times included: the
// ids the relay orders a key's records by follow the writes. Fails if the
// records are inserted in another order than they were collected.
func TestChangeRecordsOfOneTransactionFollowItsWrites(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	a, b := res("sub_order_a"), res("sub_order_b")
	var outs [5]projection.Result
	inTx(t, s, func(bt *pgx.Batch, c *projection.Changes) {
		for i, w := range []projection.Write{snap(a, 1, "trialing"), snap(b, 1, "active"), snap(a, 2, "active"),
			snap(a, 3, "past_due"), snap(b, 2, "canceled")} {
			w.Changes = c
			projection.QueueVersioned(bt, w, &outs[i])
		}
	})
	for _, o := range outs {
		require.Equal(t, projection.Applied, o.Outcome)
	}
	rows, err := s.Pool.Query(context.Background(), `SELECT message FROM outbox WHERE topic IS NOT NULL ORDER BY id`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var msg string
		require.NoError(t, rows.Scan(&msg))
		c, err := message.DecodeChange([]byte(msg))
		require.NoError(t, err)
		got = append(got, fmt.Sprintf("%s v%d %s", c.ID, *c.Version, c.Status))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"sub_order_a v1 trialing", "sub_order_b v1 active", "sub_order_a v2 active",
		"sub_order_a v3 past_due", "sub_order_b v2 canceled"}, got)
}
