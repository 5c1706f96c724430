package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// hit is a fault as it happened.
type hit struct {
	fault
	started time.Time
	// pid and partitions of the processor hit, read just before.
	pid        int
	partitions []int32
	detail     string
	err        error
	// moved is when every partition of the processor hit had a new fence
	// owner (the group gave them to another member); zero if not seen.
	moved time.Duration
}

// injector runs the fault schedule.
type injector struct {
	s    *system
	mu   sync.Mutex
	hits []*hit
	wg   sync.WaitGroup
}

func (in *injector) run(ctx context.Context, faults []fault) {
	start := time.Now()
	for _, f := range faults {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(start.Add(f.at))):
		}
		h := in.inject(ctx, f)
		in.mu.Lock()
		in.hits = append(in.hits, h)
		in.mu.Unlock()
		if len(h.partitions) > 0 {
			in.wg.Add(1)
			go func() { defer in.wg.Done(); in.watchMove(ctx, h) }()
		}
		if h.err != nil {
			in.s.log.WarnContext(ctx, "fault", slog.String("kind", f.kind), slog.String("error", h.err.Error()))
		}
	}
	in.wg.Wait()
}

func (in *injector) inject(ctx context.Context, f fault) *hit {
	h := &hit{fault: f, started: time.Now()}
	switch f.kind {
	case faultKillProcessor, faultPauseProcessor:
		p := in.s.processors[f.target]
		h.pid = p.pid()
		h.partitions = in.s.ownedBy(ctx, h.pid)
		h.started = time.Now()
		if f.kind == faultKillProcessor {
			h.err = p.kill()
			in.later(f.hold, func() error { return p.start() })
		} else {
			h.err = p.signal(syscall.SIGSTOP)
			in.later(f.hold, func() error { return p.signal(syscall.SIGCONT) })
		}
		h.detail = fmt.Sprintf("%s pid %d, %d partitions, back after %s", p.name, h.pid, len(h.partitions), f.hold)
	case faultKillRelay:
		p := in.s.relays[f.target]
		h.err = p.kill()
		in.later(f.hold, func() error { return p.start() })
		h.detail = p.name
	case faultTerminatePG:
		n, err := in.s.terminateBackends(ctx)
		h.err, h.detail = err, strconv.Itoa(n)+" backends"
	case faultMoveLeaders:
		if in.s.kafka != nil {
			in.s.kafka.ShufflePartitionLeaders()
		}
	case faultMoveCoordinator:
		if in.s.kafka != nil {
			in.s.kafka.RehashCoordinators()
		}
	}
	return h
}

// watchMove records when none of the hit processor's partitions is fenced
// by it any more: the group noticed and another member took them.
func (in *injector) watchMove(ctx context.Context, h *hit) {
	deadline := h.started.Add(2 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		var still int
		err := in.s.pool.QueryRow(ctx, `SELECT count(*) FROM partition_fence WHERE topic = $1 AND partition = ANY($2) AND owner LIKE '%-' || $3 || '-%'`,
			in.s.topic, h.partitions, strconv.Itoa(h.pid)).Scan(&still)
		if err == nil && still == 0 {
			in.mu.Lock()
			h.moved = time.Since(h.started)
			in.mu.Unlock()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// later runs fn after d, in the background; run waits for it.
func (in *injector) later(d time.Duration, fn func() error) {
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		time.Sleep(d)
		if err := fn(); err != nil {
			in.s.log.Warn("fault recovery", slog.String("error", err.Error()))
		}
	}()
}

// ownedBy reads the partitions whose fence a processor process holds. The
// owner is the processor's instance id, host-pid-random.
func (s *system) ownedBy(ctx context.Context, pid int) []int32 {
	rows, err := s.pool.Query(ctx, `SELECT partition FROM partition_fence WHERE topic = $1 AND owner LIKE '%-' || $2 || '-%' ORDER BY partition`,
		s.topic, strconv.Itoa(pid))
	if err != nil {
		return nil
	}
	parts, _ := pgx.CollectRows(rows, pgx.RowTo[int32])
	return parts
}

// terminateBackends ends every other session on the run's database: the
// services' pools must reconnect and their open transactions roll back.
func (s *system) terminateBackends(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, s.adminURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`,
		s.dbName).Scan(&n)
	return n, err
}

// print lists the faults as they happened.
func (in *injector) print(out io.Writer) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.hits) == 0 {
		return
	}
	fmt.Fprintln(out, "\nfaults:")
	for _, h := range in.hits {
		line := fmt.Sprintf("  +%-6s %s", h.at.Round(time.Second), h.kind)
		if h.detail != "" {
			line += ": " + h.detail
		}
		if h.err != nil {
			line += " (error: " + h.err.Error() + ")"
		}
		fmt.Fprintln(out, line)
	}
}
