package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/fence"
)

// session is one membership in the group: it joins, consumes until ctx
// ends, the processor fails for good, or a worker was fenced while its
// partition was still assigned here (rejoin true). Leaving and joining again
// is how that partition comes back: its fence may be re-taken only on a
// fresh assignment, never by a retry that could bump past a newer owner.
func (p *Processor) session(ctx context.Context) (rejoin bool, err error) {
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(p.cfg.Brokers...),
		kgo.ConsumerGroup(p.cfg.Group),
		kgo.ConsumeTopics(p.cfg.Topic),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(p.assigned),
		kgo.OnPartitionsRevoked(p.revoked),
		kgo.OnPartitionsLost(p.lost),
		kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.SessionTimeout(p.cfg.SessionTimeout),
		kgo.HeartbeatInterval(p.cfg.HeartbeatInterval),
		kgo.RebalanceTimeout(p.cfg.RebalanceTimeout),
	}, p.cfg.KafkaOptions...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return false, fmt.Errorf("processor: kafka client: %w", err)
	}
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	off := newOffsets(cl, p.log, p.metrics, commitTimeout)
	commitCtx, stopCommits := context.WithCancel(context.WithoutCancel(ctx))
	committed := make(chan struct{})
	go func() { defer close(committed); off.run(commitCtx) }()
	p.setWaiting("the assignment of group " + p.cfg.Group)
	p.mu.Lock()
	p.cl, p.stopPoll, p.rejoin, p.offsets = cl, stopPoll, false, off
	p.mu.Unlock()
	defer func() {
		// What is still marked is committed by revoked, which Close runs
		// when it leaves the group; it also stops the workers.
		stopCommits()
		<-committed
		cl.Close()
		ws := p.allWorkers()
		p.seal(ws)
		p.stopAll(ws)
		p.mu.Lock()
		p.cl, p.stopPoll, p.owned, p.offsets = nil, nil, map[int32]struct{}{}, nil
		p.owning, p.waiting = false, "a new session in group "+p.cfg.Group
		p.mu.Unlock()
	}()
	p.readyOnce.Do(func() { close(p.ready) })
	for {
		// Checked before polling too: a failure between sessions found no
		// poll to stop.
		if err := p.fatal(); err != nil {
			cl.AllowRebalance()
			return false, fmt.Errorf("processor: %w", err)
		}
		fetches := cl.PollRecords(pollCtx, p.cfg.MaxPollRecords)
		if err := p.fatal(); err != nil {
			cl.AllowRebalance()
			return false, fmt.Errorf("processor: %w", err)
		}
		if fetches.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
			return false, nil
		}
		if p.rejoinRequested() {
			cl.AllowRebalance()
			return true, nil
		}
		fetches.EachError(func(t string, part int32, err error) {
			p.log.WarnContext(ctx, "fetch error", slog.String("topic", t), slog.Int("partition", int(part)), slog.String("error", err.Error()))
		})
		fetches.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if len(ftp.Records) == 0 {
				return
			}
			p.mu.Lock()
			w := p.workers[ftp.Partition]
			p.mu.Unlock()
			if w == nil {
				return
			}
			// A worker that stopped (fenced, told to quit) or a shutdown
			// must never leave the poll loop blocked here: that would block
			// the rebalance that stops the workers.
			select {
			case w.recs <- ftp.Records:
			case <-w.quit:
			case <-ctx.Done():
			}
		})
		cl.AllowRebalance()
	}
}

// giveBack is called by a worker that was fenced. If the partition is still
// assigned to it (no revoke took it away first), nobody else will restart
// it: the session ends and the processor joins the group again.
func (p *Processor) giveBack(w *worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.workers[w.part] != w {
		return // revoked or lost already: the new owner has it
	}
	delete(p.workers, w.part)
	p.rejoin = true
	if p.stopPoll != nil {
		p.stopPoll()
	}
	p.log.Warn("partition fenced while still assigned here; leaving and rejoining the group so it resumes under a fresh fence",
		slog.Int("partition", int(w.part)), slog.Int64("generation", w.tok.Generation))
}

func (p *Processor) rejoinRequested() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rejoin
}

// assigned takes each new partition's fence before its worker starts. The
// take happens here and only here, while the partition is ours for certain:
// a take retried later could bump the generation past a newer owner's. It
// retries until it succeeds; the rebalance waits, since nothing could be
// written without a fence anyway. franz-go calls it after every join, also
// with nothing assigned, so it is where the processor becomes ready.
func (p *Processor) assigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	defer func() {
		if p.fatal() == nil && ctx.Err() == nil {
			p.mu.Lock()
			p.owning = true
			p.mu.Unlock()
		}
	}()
	for _, part := range assigned[p.cfg.Topic] {
		p.mu.Lock()
		p.owned[part] = struct{}{}
		p.mu.Unlock()
		if int(part) >= p.partitions {
			// The topic grew: this partition did not exist when the fences
			// were counted, and its keys used to live elsewhere.
			err := fmt.Errorf("%w: assigned partition %d of %s, fence recorded %d partitions", fence.ErrPartitionCountChanged, part, p.cfg.Topic, p.partitions)
			p.countChanged(ctx, err)
			p.setFatal(err)
			return
		}
		tok, err := p.takeFence(ctx, part)
		if err != nil {
			p.log.ErrorContext(ctx, "no fence; partition not started", slog.Int("partition", int(part)), slog.String("error", err.Error()))
			continue
		}
		w := &worker{p: p, part: part, tok: tok, recs: make(chan []*kgo.Record, 4),
			quit: make(chan struct{}), done: make(chan struct{})}
		p.mu.Lock()
		w.off = p.offsets
		p.workers[part] = w
		p.mu.Unlock()
		p.metrics.fenceTakes.Inc()
		p.log.InfoContext(ctx, "partition assigned", slog.Int("partition", int(part)), slog.Int64("generation", tok.Generation))
		go w.run(context.WithoutCancel(ctx))
	}
}

func (p *Processor) takeFence(ctx context.Context, part int32) (fence.Token, error) {
	delay := 100 * time.Millisecond
	for {
		tok, err := fence.Take(ctx, p.pool, p.cfg.Topic, part, p.partitions, p.cfg.InstanceID)
		switch {
		case err == nil:
			return tok, nil
		case errors.Is(err, fence.ErrPartitionCountChanged):
			p.countChanged(ctx, err)
			p.setFatal(err)
			return tok, err
		case ctx.Err() != nil:
			return tok, err
		case errors.Is(err, fence.ErrBusy):
			// The take already waited fence.TakeLockTimeout: no pause on
			// top. The holder is a writer finishing its batch, or an orphan
			// the server ends within fence.HolderIdleTimeout.
			p.log.WarnContext(ctx, "take fence: its lock is held; retrying", slog.Int("partition", int(part)), slog.String("error", err.Error()))
			continue
		}
		p.log.WarnContext(ctx, "take fence; retrying", slog.Int("partition", int(part)), slog.String("error", err.Error()))
		select {
		case <-ctx.Done():
			return tok, ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// revoked stops the revoked partitions' workers (each finishes the batch
// it is writing, within RevokeGrace), then commits the offsets they handed
// over, before the group may give the partitions to another member. A
// worker still running after that is sealed: nothing it finishes later is
// committed.
func (p *Processor) revoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	parts := revoked[p.cfg.Topic]
	ws := p.take(parts)
	p.stopAll(ws)
	p.seal(ws)
	if off := p.sessionOffsets(); off != nil {
		off.flush(ctx, parts, true)
	}
}

// lost seals and stops the lost partitions' workers and forgets their
// offsets: the group may have given the partitions to another member
// already, and our membership is gone, so a commit could only fail or
// rewind the new owner.
func (p *Processor) lost(ctx context.Context, _ *kgo.Client, lost map[string][]int32) {
	parts := lost[p.cfg.Topic]
	ws := p.take(parts)
	p.seal(ws)
	p.stopAll(ws)
	if off := p.sessionOffsets(); off != nil {
		off.flush(ctx, parts, false)
	}
}

// seal makes ws hand over no further offsets.
func (p *Processor) seal(ws []*worker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range ws {
		w.sealed = true
	}
}

func (p *Processor) sessionOffsets() *offsets {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.offsets
}

// markDone hands the offset of rec, the last record of a batch w wrote, to
// the committer of w's session, unless w was sealed: a revoke seals its
// workers before it returns and the partitions move, and from then on the
// new owner commits; an offset from us could rewind its progress. A batch
// finished while the revoke waits for its worker is still ours and is
// committed by the revoke.
func (p *Processor) markDone(w *worker, rec *kgo.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !w.sealed && w.off != nil {
		w.off.mark(rec)
	}
}

func (p *Processor) take(parts []int32) []*worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*worker
	for _, part := range parts {
		delete(p.owned, part)
		if w := p.workers[part]; w != nil {
			out = append(out, w)
			delete(p.workers, part)
		}
	}
	return out
}

func (p *Processor) allWorkers() []*worker {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*worker, 0, len(p.workers))
	for part, w := range p.workers {
		out = append(out, w)
		delete(p.workers, part)
	}
	return out
}

// stopAll asks workers to stop after their current batch and waits at most
// RevokeGrace. A worker stuck past that (a hung provider call) is left
// behind: the new owner's fence keeps it from writing.
func (p *Processor) stopAll(ws []*worker) {
	for _, w := range ws {
		w.stopOnce.Do(func() { close(w.quit) })
	}
	deadline := time.NewTimer(p.cfg.RevokeGrace)
	defer deadline.Stop()
	for _, w := range ws {
		select {
		case <-w.done:
		case <-deadline.C:
			p.log.Warn("worker did not stop within grace; leaving it fenced", slog.Int("partition", int(w.part)))
			return
		}
	}
}
