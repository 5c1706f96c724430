package action_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/action"
)

const orderedKind = "change:billing"

// recordStreams records n changes of each of streams resources, stream by
// stream in order, one transaction per change (as the feeder's batches
// come), and returns each action's key by stream in recorded order.
func recordStreams(t *testing.T, pool *pgxpool.Pool, streams, n int) map[string][]action.Key {
	t.Helper()
	out := map[string][]action.Key{}
	for v := 1; v <= n; v++ {
		for s := range streams {
			res := fmt.Sprintf("subscription/sub_%d", s)
			k := action.Key{Provider: "stripe", SourceAccount: "acct_1", Environment: "test", SubjectID: fmt.Sprintf("%s@v%d", res, v), Kind: orderedKind}
			b := &pgx.Batch{}
			action.QueueOrderedRecord(b, action.OrderedRecord{Record: action.Record{Key: k, EventID: "evt", Body: []byte(`{}`)}, OrderKey: res})
			// A re-read records nothing new and takes no new place.
			action.QueueOrderedRecord(b, action.OrderedRecord{Record: action.Record{Key: k, EventID: "evt", Body: []byte(`{}`)}, OrderKey: res})
			require.NoError(t, pool.SendBatch(context.Background(), b).Close())
			out[res] = append(out[res], k)
		}
	}
	return out
}

// The ordered claim reads action_due for its candidates and
// action_order_open for the earlier unsettled action of each, on tables
// without statistics and with thousands of settled changes. Fails if the
// probe can be planned as a scan of the stream's (or the kind's) actions.
func TestOrderedClaimPlanProbesTheOpenStreamIndexWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	plan := func() string {
		rows, err := s.Pool.Query(ctx, "EXPLAIN "+action.ClaimOrderedSQL, orderedKind, 16, int64(40000), 20, "x", "")
		require.NoError(t, err)
		var lines []string
		for rows.Next() {
			var l string
			require.NoError(t, rows.Scan(&l))
			lines = append(lines, l)
		}
		require.NoError(t, rows.Err())
		return strings.Join(lines, "\n")
	}
	check := func(p string) {
		require.Contains(t, p, "using action_due on action a", p)
		require.Contains(t, p, "using action_order_open on action e", p)
		// The probe descends to its stream: the stream's columns are in
		// the index condition, not a filter over the kind's open rows.
		require.Regexp(t, `using action_order_open on action e[^\n]*\n\s+Index Cond: \(.*order_key = a\.order_key.*order_seq < a\.order_seq`, p)
		require.NotContains(t, p, "Seq Scan", p)
		require.NotContains(t, p, "Sort", p)
	}
	check(plan())
	_, err := s.Pool.Exec(ctx, `ALTER TABLE action SET (autovacuum_enabled = false);
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, body, order_key, order_seq)
SELECT 'stripe', 'acct', 'test', 'subscription/sub_' || (i % 500) || '@v' || i, 'change:billing', 'evt_' || i,
       CASE WHEN i > 19000 THEN 'pending' WHEN i % 997 = 0 THEN 'dead' ELSE 'sent' END, '{}',
       'subscription/sub_' || (i % 500), nextval('action_order_seq')
FROM generate_series(1, 20000) i`)
	require.NoError(t, err)
	check(plan())
}

// Per subscriber and resource, a later change is never claimed while an
// earlier one is unsettled: eight senders claim and settle concurrently
// (failing a third of the attempts), and at every claim each earlier
// change of its stream has been sent and no other change of its stream is
// in flight. Fails if the ordered claim's NOT EXISTS probe is removed, or
// if it lets two changes of a stream be claimed by one statement.
func TestLaterChangeIsNeverClaimedBeforeAnEarlierOneIsSettled(t *testing.T) {
	t.Parallel()
	s := dbtest.NewWithConns(t, 12)
	ctx := context.Background()
	const streams, perStream = 6, 12
	keys := recordStreams(t, s.Pool, streams, perStream)
	var n int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM action`).Scan(&n))
	require.Equal(t, streams*perStream, n)

	stream := func(k action.Key) (string, int) {
		res, v, _ := strings.Cut(k.SubjectID, "@v")
		var i int
		_, _ = fmt.Sscan(v, &i)
		return res, i
	}
	var mu sync.Mutex
	sent := map[string]int{}      // stream → its last sent change
	inFlight := map[string]bool{} // stream → a change of it is claimed
	var delivered []string
	lease := action.Lease{For: time.Minute, MaxAttempts: 1000}
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Minute)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := lease
			l.SenderID = fmt.Sprintf("sender-%d", w)
			for time.Now().Before(deadline) {
				mu.Lock()
				done := len(delivered) == streams*perStream
				mu.Unlock()
				if done {
					return
				}
				claimed, err := action.ClaimOrdered(ctx, s.Pool, orderedKind, 3, l)
				if err != nil {
					t.Error(err)
					return
				}
				for _, c := range claimed {
					res, v := stream(c.Key)
					mu.Lock()
					if sent[res] != v-1 {
						t.Errorf("%s claimed while %s's last sent change is %d", c.Key.SubjectID, res, sent[res])
					}
					if inFlight[res] {
						t.Errorf("%s claimed while another change of %s is in flight", c.Key.SubjectID, res)
					}
					inFlight[res] = true
					mu.Unlock()
				}
				for _, c := range claimed {
					res, v := stream(c.Key)
					o := action.Outcome{Status: action.StatusFailed, Error: "503"}
					if rand.IntN(3) > 0 {
						o = action.Outcome{Status: action.StatusSent}
					}
					mu.Lock()
					// Marked before the write: once the write commits, the
					// next change may be claimed at once.
					inFlight[res] = false
					if o.Status == action.StatusSent {
						sent[res] = v
						delivered = append(delivered, c.Key.SubjectID)
					}
					mu.Unlock()
					st, err := action.Settle(ctx, s.Pool, c, o, l.MaxAttempts)
					if err != nil || st != o.Status {
						t.Errorf("settle %s: %q %v", c.Key.SubjectID, st, err)
					}
				}
			}
		}()
	}
	wg.Wait()
	require.Len(t, delivered, streams*perStream)
	for res, ks := range keys {
		require.Equal(t, perStream, sent[res], "%s: %v", res, ks)
	}
}

// A dead change blocks its stream: the next change of the resource is not
// claimed until the dead one is replayed and sent; other resources go on.
// Fails if the probe counts a dead action as settled.
func TestDeadChangeBlocksItsResourceUntilReplayed(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	keys := recordStreams(t, s.Pool, 2, 2)
	l := action.Lease{For: time.Minute, MaxAttempts: 5, SenderID: "s"}
	first, err := action.ClaimOrdered(ctx, s.Pool, orderedKind, 10, l)
	require.NoError(t, err)
	require.Len(t, first, 2, "the first change of each resource")
	for _, c := range first {
		o := action.Outcome{Status: action.StatusSent}
		if c.Key == keys["subscription/sub_0"][0] {
			o = action.Outcome{Status: action.StatusDead, Error: "HTTP 400"}
		}
		_, err := action.Settle(ctx, s.Pool, c, o, l.MaxAttempts)
		require.NoError(t, err)
	}
	next, err := action.ClaimOrdered(ctx, s.Pool, orderedKind, 10, l)
	require.NoError(t, err)
	require.Len(t, next, 1)
	require.Equal(t, keys["subscription/sub_1"][1], next[0].Key, "only the resource without a dead change goes on")
	_, err = action.Settle(ctx, s.Pool, next[0], action.Outcome{Status: action.StatusSent}, l.MaxAttempts)
	require.NoError(t, err)
	none, err := action.ClaimOrdered(ctx, s.Pool, orderedKind, 10, l)
	require.NoError(t, err)
	require.Empty(t, none, "sub_0's second change waits behind its dead first")

	require.NoError(t, action.ReplayDead(ctx, s.Pool, keys["subscription/sub_0"][0]))
	again, err := action.ClaimOrdered(ctx, s.Pool, orderedKind, 10, l)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, keys["subscription/sub_0"][0], again[0].Key, "the replayed change, and not yet the one behind it")
	_, err = action.Settle(ctx, s.Pool, again[0], action.Outcome{Status: action.StatusSent}, l.MaxAttempts)
	require.NoError(t, err)
	last, err := action.ClaimOrdered(ctx, s.Pool, orderedKind, 10, l)
	require.NoError(t, err)
	require.Len(t, last, 1)
	require.Equal(t, keys["subscription/sub_0"][1], last[0].Key)
}

// BenchmarkOrderedClaim claims (and settles as sent) batches of 16 from a
// backlog of 4000 changes spread over streams: per claim, the walk of
// action_due passes the changes blocked behind their stream's head, so its
// cost grows with the backlog per resource. Reports ms per claim;
// "unordered" is the same backlog through the plain claim, for comparison.
func BenchmarkOrderedClaim(b *testing.B) {
	for _, perStream := range []int{0, 1, 20, 200} {
		name := fmt.Sprintf("backlog_per_resource=%d", perStream)
		claim := func(ctx context.Context, pool *pgxpool.Pool, l action.Lease) ([]action.Claimed, error) {
			return action.ClaimOrdered(ctx, pool, orderedKind, 16, l)
		}
		if perStream == 0 {
			name, perStream = "unordered", 1
			claim = func(ctx context.Context, pool *pgxpool.Pool, l action.Lease) ([]action.Claimed, error) {
				return action.Claim(ctx, pool, orderedKind, "", 16, l)
			}
		}
		b.Run(name, func(b *testing.B) {
			s := dbtest.NewWithConns(b, 4)
			ctx := context.Background()
			streams := 4000 / perStream
			_, err := s.Pool.Exec(ctx, `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, body, order_key, order_seq, next_attempt_at)
SELECT 'stripe', 'acct', 'test', 'subscription/sub_' || (i % $1) || '@v' || i, 'change:billing', 'evt', '{}',
       'subscription/sub_' || (i % $1), nextval('action_order_seq'), now() - interval '1 hour' + i * interval '1 millisecond'
FROM generate_series(1, 4000) i`, streams)
			require.NoError(b, err)
			l := action.Lease{For: time.Minute, MaxAttempts: 10, SenderID: "bench"}
			claimed := 0
			for b.Loop() {
				cs, err := claim(ctx, s.Pool, l)
				require.NoError(b, err)
				b.StopTimer()
				if len(cs) == 0 {
					_, err := s.Pool.Exec(ctx, `UPDATE action SET status = 'pending', next_attempt_at = now() - interval '1 hour' + order_seq * interval '1 microsecond'`)
					require.NoError(b, err)
				}
				for _, c := range cs {
					_, err := action.Settle(ctx, s.Pool, c, action.Outcome{Status: action.StatusSent}, l.MaxAttempts)
					require.NoError(b, err)
				}
				claimed += len(cs)
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/claim")
			b.ReportMetric(float64(claimed)/float64(b.N), "actions/claim")
		})
	}
}

// An erasure empties the bodies of the subscribers' deliveries of the
// account (or of the named resources), sent ones too, and kills the
// unsent: a change record carries the customer's identity. Fails if
// action.Erase leaves a delivery's body.
func TestErasureEmptiesSubscriberDeliveries(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	keys := recordStreams(t, s.Pool, 2, 2)
	l := action.Lease{For: time.Minute, MaxAttempts: 5, SenderID: "s"}
	first, err := action.ClaimOrdered(ctx, s.Pool, orderedKind, 10, l)
	require.NoError(t, err)
	for _, c := range first {
		_, err := action.Settle(ctx, s.Pool, c, action.Outcome{Status: action.StatusSent}, l.MaxAttempts)
		require.NoError(t, err)
	}
	erase := func(ids []string) {
		tx, err := s.Pool.Begin(ctx)
		require.NoError(t, err)
		_, err = action.Erase(ctx, tx, "stripe", "acct_1", "test", ids)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	bodies := func() map[string]string {
		rows, err := s.Pool.Query(ctx, `SELECT subject_id, status || ':' || coalesce(body, 'NULL') FROM action`)
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var k, v string
			require.NoError(t, rows.Scan(&k, &v))
			out[k] = v
		}
		return out
	}
	erase([]string{"sub_1"})
	b := bodies()
	require.Equal(t, "sent:NULL", b[keys["subscription/sub_1"][0].SubjectID])
	require.Equal(t, "dead:NULL", b[keys["subscription/sub_1"][1].SubjectID])
	require.Equal(t, "sent:{}", b[keys["subscription/sub_0"][0].SubjectID], "another resource's delivery is left")
	require.Equal(t, "pending:{}", b[keys["subscription/sub_0"][1].SubjectID])
	erase(nil)
	for k, v := range bodies() {
		require.Contains(t, v, ":NULL", k)
	}
}
