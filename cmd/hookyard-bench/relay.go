package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/promread"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/db"
)

// relayRun is one timed drain of the preloaded outbox.
type relayRun struct {
	name    string
	relays  int
	kafka   bool
	rows    int64
	elapsed time.Duration
}

func (r relayRun) rate() float64 { return float64(r.rows) / r.elapsed.Seconds() }

// relaySection measures the relay: Postgres alone claiming and deleting the
// rows (the relay's own loop with a publisher that acknowledges at once), then
// the relay producing to an in-process kfake, with one and two relays.
func (b *bench) relaySection(ctx context.Context) error {
	o := b.opts
	var runs []relayRun
	for _, rc := range []struct {
		name   string
		relays int
		kafka  bool
	}{
		{"ceiling: claim + delete, no broker", 1, false},
		{"ceiling: claim + delete, no broker", 2, false},
		{"relay → kfake", 1, true},
		{"relay → kfake", 2, true},
	} {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b.step("relay: %s, %d relay(s): preloading %d rows of %d B", rc.name, rc.relays, o.relayRows, o.relayPayload)
		if err := b.preloadOutbox(ctx, o.relayRows, o.relayPayload); err != nil {
			return err
		}
		res, err := b.relayDrain(ctx, rc.relays, rc.kafka)
		if err != nil {
			return fmt.Errorf("%s with %d relay(s): %w", rc.name, rc.relays, err)
		}
		res.name = rc.name
		b.step("relay: %d rows in %s (%.0f rows/s)", res.rows, res.elapsed.Round(time.Millisecond), res.rate())
		runs = append(runs, res)
	}
	b.printRelay(runs)
	return b.truncate(ctx, `TRUNCATE outbox`)
}

// preloadOutbox replaces the outbox with n rows whose messages carry size
// bytes of random base64, keyed over 10,000 resources.
func (b *bench) preloadOutbox(ctx context.Context, n, size int) error {
	if err := b.truncate(ctx, `TRUNCATE outbox`); err != nil {
		return err
	}
	raw := make([]byte, size*3/4)
	rows := make([][]any, 0, n)
	for i := range n {
		_, _ = rand.Read(raw)
		msg := `{"kind":"event","seq":` + strconv.Itoa(i) + `,"pad":"` + base64.StdEncoding.EncodeToString(raw) + `"}`
		rows = append(rows, []any{"stripe/acct_bench/test/subscription/sub_" + strconv.Itoa(i%10_000), msg})
	}
	if _, err := b.pool.CopyFrom(ctx, pgx.Identifier{"outbox"}, []string{"message_key", "message"}, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("preload outbox: %w", err)
	}
	// As autovacuum would have by the time such a backlog is drained.
	if _, err := b.pool.Exec(ctx, `VACUUM ANALYZE outbox`); err != nil {
		return fmt.Errorf("vacuum outbox: %w", err)
	}
	return nil
}

// instantPublisher acknowledges every record at once: the relay's loop with
// only Postgres left to wait for.
type instantPublisher struct{}

func (instantPublisher) Publish(_ context.Context, r *kgo.Record, done func(*kgo.Record, error)) {
	done(r, nil)
}

// relayDrain runs n relays, each with a pool of its own as a separate process
// would have, until every preloaded row is published, and times it.
func (b *bench) relayDrain(ctx context.Context, n int, kafka bool) (relayRun, error) {
	o := b.opts
	res := relayRun{relays: n, kafka: kafka}
	want, err := b.count(ctx, `SELECT count(*) FROM outbox`)
	if err != nil {
		return res, err
	}
	var brokers []string
	if kafka {
		c, err := b.newCluster()
		if err != nil {
			return res, err
		}
		defer c.Close()
		brokers = c.ListenAddrs()
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var published atomic.Int64
	errs := make(chan error, n)
	var regs []*prometheus.Registry
	var starts []func()
	for i := range n {
		pool, err := db.Open(ctx, o.dbURL, db.Options{MaxConns: int32(o.relayInFlight + 2), ApplicationName: fmt.Sprintf("hookyard-bench-relay-%d", i)})
		if err != nil {
			return res, err
		}
		defer pool.Close()
		reg := prometheus.NewRegistry()
		regs = append(regs, reg)
		cfg := outboxrelay.Config{Brokers: brokers, Topic: benchTopic, BatchSize: o.relayBatch, InFlight: o.relayInFlight, Registerer: reg}
		if !kafka {
			cfg.Publisher = instantPublisher{}
		}
		r, err := outboxrelay.New(pool, b.log, cfg)
		if err != nil {
			return res, err
		}
		if err := warm(ctx, pool, o.relayInFlight+1); err != nil {
			return res, err
		}
		starts = append(starts, func() { errs <- r.Run(rctx) })
	}
	start := time.Now()
	for _, s := range starts {
		go s()
	}
	deadline := time.After(o.relayTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var sum float64
		for _, reg := range regs {
			v, err := gathered(reg, "hookyard_outbox_published_total")
			if err != nil {
				return res, err
			}
			sum += v
		}
		published.Store(int64(sum))
		if published.Load() >= want {
			break
		}
		select {
		case <-tick.C:
		case err := <-errs:
			return res, fmt.Errorf("relay stopped: %w", err)
		case <-deadline:
			return res, fmt.Errorf("gave up after %s with %d of %d rows published", o.relayTimeout, published.Load(), want)
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	res.elapsed = time.Since(start)
	res.rows = published.Load()
	cancel()
	for range n {
		if err := <-errs; err != nil && !errors.Is(err, context.Canceled) {
			return res, err
		}
	}
	left, err := b.count(ctx, `SELECT count(*) FROM outbox`)
	if err != nil {
		return res, err
	}
	if left != 0 {
		return res, fmt.Errorf("%d rows left in the outbox after the relays reported all published", left)
	}
	return res, nil
}

// warm opens n connections so the timed run does not pay for dialing.
func warm(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("warm relay pool: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// gathered reads one counter or gauge from a registry.
func gathered(reg *prometheus.Registry, name string) (float64, error) {
	v, found, err := promread.Sum(reg, name, nil)
	if err == nil && !found {
		err = fmt.Errorf("metric %s not registered", name)
	}
	return v, err
}

func (b *bench) printRelay(runs []relayRun) {
	o := b.opts
	var ceiling float64
	for _, r := range runs {
		if !r.kafka {
			ceiling = max(ceiling, r.rate())
		}
	}
	t := newTable(fmt.Sprintf("C. outbox relay: %d preloaded rows, %d B random payloads", o.relayRows, o.relayPayload),
		"run", "relays", "rows/s", "of ceiling", "goal")
	for _, r := range runs {
		goal := ""
		if r.kafka {
			goal = verdict(r.rate() >= 100_000 && r.rate() >= 0.5*ceiling)
		}
		t.add(r.name, strconv.Itoa(r.relays), fmt.Sprintf("%.0f", r.rate()), fmt.Sprintf("%.2f", r.rate()/ceiling), goal)
	}
	t.note("Ceiling: the relay's own claim loop (FOR UPDATE SKIP LOCKED, %d rows per batch, %d batches in flight, DELETE + COMMIT) with a publisher that acknowledges at once: Postgres alone. The best of its runs is the ceiling.", o.relayBatch, o.relayInFlight)
	t.note("relay → kfake: the same relays producing to an in-process kfake (%d partitions, acks=all, idempotent), which shares the CPUs with them and with Postgres. Each relay has a pool of its own; time from Run until every row is acknowledged and deleted.", o.partitions)
	t.note("Goal: ≥ 100,000 rows/s and ≥ 0.5 of the ceiling.")
	b.emit(t)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}
