package processor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
)

// commitRig is a group member of a test topic that polled perRecs records of
// each partition, and a Processor around it with the session committer set
// but not running: nothing is committed unless a test makes it.
type commitRig struct {
	k     *kafkatest.Cluster
	cl    *kgo.Client
	adm   *kadm.Client
	p     *Processor
	recs  map[int32][]*kgo.Record
	parts int32
}

func newCommitRig(t *testing.T, parts int32, perPart int) *commitRig {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	k := kafkatest.New(t, parts)
	prod, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer prod.Close()
	for part := range parts {
		for i := range perPart {
			require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: k.Topic, Partition: part, Value: fmt.Appendf(nil, "%d-%d", part, i)}).FirstErr())
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.Brokers...), kgo.ConsumerGroup(k.Group), kgo.ConsumeTopics(k.Topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	r := &commitRig{k: k, cl: cl, adm: kadm.NewClient(cl), recs: map[int32][]*kgo.Record{}, parts: parts}
	for n := 0; n < int(parts)*perPart; {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "polled %d of %d records", n, int(parts)*perPart)
		fs.EachRecord(func(rec *kgo.Record) {
			r.recs[rec.Partition] = append(r.recs[rec.Partition], rec)
			n++
		})
	}
	m := newMetrics(prometheus.NewRegistry())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.p = &Processor{log: log, metrics: m, cfg: Config{Topic: k.Topic, RevokeGrace: 5 * time.Second},
		workers: map[int32]*worker{}, owned: map[int32]struct{}{}}
	r.p.offsets = newOffsets(cl, log, m, commitTimeout)
	return r
}

// worker registers a running worker for part, as assigned does. Told to
// quit, it first finishes the batch last (when given), as a worker finishes
// the batch it is writing.
func (r *commitRig) worker(part int32, last ...*kgo.Record) *worker {
	w := &worker{p: r.p, part: part, recs: make(chan []*kgo.Record, 1), quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		<-w.quit
		w.commit(last)
		close(w.done)
	}()
	r.p.mu.Lock()
	w.off = r.p.offsets
	r.p.workers[part] = w
	r.p.mu.Unlock()
	return w
}

// committed is the group's committed offset per partition (-1: none).
func (r *commitRig) committed(t *testing.T) map[int32]int64 {
	t.Helper()
	os, err := r.adm.FetchOffsets(context.Background(), r.k.Group)
	require.NoError(t, err)
	out := map[int32]int64{}
	for part := range r.parts {
		out[part] = -1
		if o, ok := os.Lookup(r.k.Topic, part); ok {
			require.NoError(t, o.Err)
			out[part] = o.At
		}
	}
	return out
}

// A revoke commits what the revoked partitions' workers handed over before
// it returns (before the group can give the partitions to another member),
// the batch a worker finishes while the revoke waits for it included, and
// nothing of the partitions it keeps; a worker whose partition was taken
// away hands over nothing any more; a lost partition's offsets are
// forgotten, never committed, also the batch its worker finishes while
// stopping. Fails without the revoke's flush, with a revoke that drops the
// batch its worker finishes, without the seal, or without lost's drop.
func TestRevokeCommitsHandedOverOffsetsOfItsPartitionsOnly(t *testing.T) {
	t.Parallel()
	r := newCommitRig(t, 4, 5)
	ctx := context.Background()
	w0, w1, w2 := r.worker(0), r.worker(1, r.recs[1][3]), r.worker(2, r.recs[2][4])
	r.worker(3, r.recs[3][4])
	w0.commit(r.recs[0][:3])
	w1.commit(r.recs[1][:2])
	w2.commit(r.recs[2][:2])
	require.Equal(t, map[int32]int64{0: -1, 1: -1, 2: -1, 3: -1}, r.committed(t), "nothing committed before a revoke (the committer is not running)")

	r.p.revoked(ctx, r.cl, map[string][]int32{r.k.Topic: {0}})
	require.Equal(t, map[int32]int64{0: 3, 1: -1, 2: -1, 3: -1}, r.committed(t), "the revoked partition's progress is committed by the revoke itself")

	w0.commit(r.recs[0]) // a batch the revoked worker finished after the revoke
	r.p.offsets.flush(ctx, []int32{0}, true)
	require.Equal(t, map[int32]int64{0: 3, 1: -1, 2: -1, 3: -1}, r.committed(t), "the revoked worker's later batch must not be committed")

	r.p.revoked(ctx, r.cl, map[string][]int32{r.k.Topic: {1}})
	require.Equal(t, map[int32]int64{0: 3, 1: 4, 2: -1, 3: -1}, r.committed(t), "the batch finished while the revoke waited is committed")

	r.p.lost(ctx, r.cl, map[string][]int32{r.k.Topic: {2}})
	r.p.offsets.flush(ctx, []int32{0, 1, 2}, true)
	require.Equal(t, map[int32]int64{0: 3, 1: 4, 2: -1, 3: -1}, r.committed(t), "a lost partition's offsets are never committed")

	// The end of a session (Close) revokes what is left.
	r.p.revoked(ctx, r.cl, map[string][]int32{r.k.Topic: {3}})
	require.Equal(t, map[int32]int64{0: 3, 1: 4, 2: -1, 3: 5}, r.committed(t))
}

// Many workers hand offsets over concurrently while the committer runs and
// revokes flush: every partition ends committed at its last handed-over
// record, whatever the interleaving. Run with -race.
func TestConcurrentHandOversCommitEachPartitionsLatest(t *testing.T) {
	t.Parallel()
	const parts, per = 8, 40
	r := newCommitRig(t, parts, per)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.p.offsets.run(ctx) }()
	var wg sync.WaitGroup
	for part := range int32(parts) {
		w := r.worker(part)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				w.commit(r.recs[part][i : i+1])
				if i%7 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	// Flushes in the middle (a revoke's, without taking the partitions
	// away) commit half the partitions while the committer runs.
	for range 5 {
		time.Sleep(2 * time.Millisecond)
		r.p.offsets.flush(ctx, []int32{0, 2, 4, 6}, true)
	}
	wg.Wait()
	want := map[int32]int64{}
	for part := range int32(parts) {
		want[part] = per
	}
	require.Eventually(t, func() bool {
		got := r.committed(t)
		for part, o := range got {
			if o != want[part] {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every partition committed at its last record")
	cancel()
	<-done
}
