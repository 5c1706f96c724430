package processor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// offsets coalesces the workers' offset commits. A worker hands over the
// last record of each batch it wrote and goes on with the next one; one
// goroutine per group session commits everything handed over since its
// previous request, all partitions in one OffsetCommit. franz-go runs
// synchronous commits one at a time per client, so a commit per batch and
// partition made every worker wait behind the others'.
//
// The work is in Postgres before its offset is handed over; an offset that
// is never committed only means a redelivery, which the inbox status and
// the projections' versions make harmless.
//
// Only the partition's current worker may hand over an offset
// (Processor.markDone), and a revoke commits the revoked partitions'
// offsets itself before it returns, after any request in flight: no offset
// of ours reaches the group after the partition was given away.
type offsets struct {
	cl      *kgo.Client
	log     *slog.Logger
	m       *metrics
	timeout time.Duration

	mu      sync.Mutex
	pending map[int32]*kgo.Record

	// inflight is held for as long as one commit request runs, so that a
	// revoke waits for a request that may carry its partitions.
	inflight sync.Mutex
	wake     chan struct{}
}

func newOffsets(cl *kgo.Client, log *slog.Logger, m *metrics, timeout time.Duration) *offsets {
	return &offsets{cl: cl, log: log, m: m, timeout: timeout,
		pending: map[int32]*kgo.Record{}, wake: make(chan struct{}, 1)}
}

// mark records rec (the last record of a written batch) for the next commit.
func (o *offsets) mark(rec *kgo.Record) {
	o.mu.Lock()
	if cur := o.pending[rec.Partition]; cur == nil || cur.Offset < rec.Offset {
		o.pending[rec.Partition] = rec
	}
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// run commits what was marked until ctx ends. A request carries every
// partition marked since the previous one. A failed request's offsets go
// back to pending (unless newer ones were marked meanwhile) and are tried
// again shortly.
func (o *offsets) run(ctx context.Context) {
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.wake:
		case <-retry.C:
		}
		o.inflight.Lock()
		recs := o.take(nil)
		var err error
		if len(recs) > 0 {
			err = o.commit(ctx, recs)
			if err != nil {
				o.restore(recs)
			}
		}
		o.inflight.Unlock()
		if err != nil && ctx.Err() == nil {
			o.log.Warn("commit offsets; retrying", slog.Int("partitions", len(recs)), slog.String("error", err.Error()))
			retry.Reset(500 * time.Millisecond)
		}
	}
}

// flush commits the offsets marked for parts now, after any request in
// flight, and forgets them; with commit false it only forgets them (lost
// partitions: the group may already have given them to another member).
func (o *offsets) flush(ctx context.Context, parts []int32, commit bool) {
	if len(parts) == 0 {
		return
	}
	o.inflight.Lock()
	defer o.inflight.Unlock()
	recs := o.take(parts)
	if !commit || len(recs) == 0 {
		return
	}
	if err := o.commit(ctx, recs); err != nil {
		o.log.Warn("commit offsets of revoked partitions", slog.Int("partitions", len(recs)), slog.String("error", err.Error()))
	}
}

func (o *offsets) commit(ctx context.Context, recs []*kgo.Record) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	err := o.cl.CommitRecords(ctx, recs...)
	result := "ok"
	if err != nil {
		result = "failed"
	}
	o.m.offsetCommits.WithLabelValues(result).Inc()
	return err
}

// take removes and returns the pending records of parts (all when parts is
// nil).
func (o *offsets) take(parts []int32) []*kgo.Record {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []*kgo.Record
	if parts == nil {
		for part, r := range o.pending {
			out = append(out, r)
			delete(o.pending, part)
		}
		return out
	}
	for _, part := range parts {
		if r := o.pending[part]; r != nil {
			out = append(out, r)
			delete(o.pending, part)
		}
	}
	return out
}

func (o *offsets) restore(recs []*kgo.Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range recs {
		if cur := o.pending[r.Partition]; cur == nil || cur.Offset < r.Offset {
			o.pending[r.Partition] = r
		}
	}
}
