package main

// Storage parts "soak" and "ladder": each layout under a steady rate while
// a short retention horizon passes several times, and each layout's highest
// rate with Postgres's CPU per event.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// soakSample is the database at the end of one window of the soak.
type soakSample struct {
	Elapsed    float64 `json:"elapsed_s"`
	Database   int64   `json:"database_bytes"`
	Total      int64   `json:"relations_bytes"`
	Dead       int64   `json:"dead_tuples"`
	Rows       int64   `json:"inbox_rows"`
	Accepted   float64 `json:"accepted_per_s"`
	HTTPP99    float64 `json:"http_p99_s"`
	InboxP99   float64 `json:"inbox_p99_s"` // -1: the layout's inbox has no received_at/processed_at to read it from
	HTTPErrors string  `json:"http_errors"`
	Boundary   bool    `json:"horizon_boundary"`
}

// soakResult is one layout's soak.
type soakResult struct {
	Side    string       `json:"side"`
	Samples []soakSample `json:"samples"`
	// First and Last are the database sizes at the first horizon boundary
	// and at the end; Held: Last ≤ 1.1 × First.
	First, Last int64   `json:"-"`
	Ratio       float64 `json:"last_over_first"`
	Held        bool    `json:"held"`
	Err         string  `json:"error,omitempty"`
}

func (b *bench) storageSoak(ctx context.Context, sides []*storageSide) error {
	var results []*soakResult
	defer func() { b.printSoak(sides, results) }()
	for _, s := range sides {
		r, err := b.soakSide(ctx, s)
		if r != nil {
			results = append(results, r)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", s.label, err)
		}
	}
	return nil
}

func (b *bench) soakSide(ctx context.Context, s *storageSide) (*soakResult, error) {
	o := b.opts
	r := &soakResult{Side: s.key}
	dbURL, cfgPath, auth, err := b.prepareSide(ctx, s, partSoak, o.soakHorizon, o.soakInterval, true)
	if err != nil {
		return nil, err
	}
	p, err := b.startDev(ctx, devSpec{bin: s.bin, dbURL: dbURL, statistics: true, cfgPath: cfgPath, auth: auth,
		warmup: 5 * time.Second, warmupRate: o.soakRate})
	if err != nil {
		return nil, err
	}
	defer p.close()
	windows := int(o.soakDuration / o.soakInterval)
	// Partitions are aligned on the clock (UTC multiples of their
	// interval), and the database holds from horizon to horizon plus one
	// interval of bodies depending on how far the clock is into the
	// current partition. The soak starts soakPhase after a multiple of the
	// interval, so every sample (the first horizon boundary's included) is
	// taken at the same point of a partition, a retention round after it
	// began: sizes at successive boundaries compare like for like.
	wait := time.Until(time.Now().Truncate(o.soakInterval).Add(o.soakInterval + soakPhase(o.soakInterval)))
	b.step("storage soak, %s: %s/s for %s, horizon %s, a sample every %s (starting in %s, %s into a partition)", s.label, fmtRate(o.soakRate), o.soakDuration, o.soakHorizon, o.soakInterval,
		wait.Round(time.Second), soakPhase(o.soakInterval))
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(wait):
	}
	start := time.Now()
	nextBoundary := o.soakHorizon
	for w := range windows {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		from := time.Now()
		cl := loadClient(o.pipeWorkers)
		st := openLoop(ctx, cl, p.url, p.delivery(fmt.Sprintf("s%d_", w)), o.soakRate, o.soakInterval, o.pipeWorkers)
		cl.CloseIdleConnections()
		to := time.Now()
		sm, err := soakSampleOf(ctx, p.pool, from, to)
		if err != nil {
			return r, err
		}
		sm.Elapsed = time.Since(start).Seconds()
		sm.Accepted = float64(st.accepted) / max(st.elapsed.Seconds(), o.soakInterval.Seconds())
		sm.HTTPP99 = percentile(st.lat, 0.99).Seconds()
		sm.HTTPErrors = st.errorSummary()
		if time.Duration(float64(w+1)*float64(o.soakInterval)) >= nextBoundary {
			sm.Boundary = true
			for nextBoundary <= time.Duration(float64(w+1)*float64(o.soakInterval)) {
				nextBoundary += o.soakHorizon
			}
		}
		r.Samples = append(r.Samples, sm)
		b.step("storage soak, %s: %s, database %s, %s dead tuples, HTTP p99 %s", s.label, time.Duration(sm.Elapsed*float64(time.Second)).Round(time.Second),
			fmtBytes(sm.Database), fmtInt(sm.Dead), fmtDur(secs(sm.HTTPP99)))
	}
	for _, sm := range r.Samples {
		if sm.Boundary {
			r.First = sm.Database
			break
		}
	}
	if n := len(r.Samples); n > 0 && r.First > 0 {
		r.Last = r.Samples[n-1].Database
		r.Ratio = float64(r.Last) / float64(r.First)
		r.Held = r.Ratio <= 1.1
	}
	return r, nil
}

// soakPhase is how far into a partition's interval the soak starts and
// samples: past the retention round that follows the partition's start.
func soakPhase(interval time.Duration) time.Duration {
	return min(interval/4, soakRound+5*time.Second)
}

// soakSampleOf reads the database's size, dead tuples and inbox rows, and
// the inbox latency (processed_at − received_at) of events received in
// [from, to): those still pending count with their age so far.
func soakSampleOf(ctx context.Context, pool *pgxpool.Pool, from, to time.Time) (soakSample, error) {
	var sm soakSample
	sz, err := readSizes(ctx, pool)
	if err != nil {
		return sm, err
	}
	sm.Database, sm.Total = sz.Database, sz.Total
	if sm.Dead, err = deadTuples(ctx, pool); err != nil {
		return sm, err
	}
	if sm.Rows, err = countInbox(ctx, pool); err != nil {
		return sm, err
	}
	sm.InboxP99 = -1
	rows, err := pool.Query(ctx, `SELECT coalesce(processed_at, clock_timestamp()) - received_at FROM webhook_inbox
WHERE received_at >= $1 AND received_at < $2`, from, to)
	if err == nil {
		var lat []time.Duration
		for rows.Next() {
			var d time.Duration
			if rows.Scan(&d) == nil {
				lat = append(lat, d)
			}
		}
		if rows.Err() == nil && len(lat) > 0 {
			slices.Sort(lat)
			sm.InboxP99 = percentile(lat, 0.99).Seconds()
		}
	}
	return sm, nil
}

func (b *bench) printSoak(sides []*storageSide, results []*soakResult) {
	if len(results) == 0 {
		return
	}
	t := newTable(fmt.Sprintf("S4. Soak at %s/s for %s, retention horizon %s (partitions of %s in the new layout): database size at each sample",
		fmtRate(b.opts.soakRate), b.opts.soakDuration, b.opts.soakHorizon, b.opts.soakInterval),
		sideHeader("minute", sides[:len(results)], "database", "dead tuples", "inbox rows", "p99 HTTP / inbox")...)
	n := 0
	for _, r := range results {
		n = max(n, len(r.Samples))
	}
	for i := range n {
		cells := []string{""}
		for _, r := range results {
			if i >= len(r.Samples) {
				cells = append(cells, "—", "—", "—", "—")
				continue
			}
			sm := r.Samples[i]
			if cells[0] == "" {
				cells[0] = fmt.Sprintf("%.1f", sm.Elapsed/60)
				if sm.Boundary {
					cells[0] += " (horizon)"
				}
			}
			inbox := "n/a"
			if sm.InboxP99 >= 0 {
				inbox = fmtDur(secs(sm.InboxP99))
			}
			cells = append(cells, fmtBytes(sm.Database), fmtInt(sm.Dead), fmtInt(sm.Rows), fmtDur(secs(sm.HTTPP99))+" / "+inbox)
		}
		t.add(cells...)
	}
	check := []string{"last ≤ 1.1 × first horizon boundary"}
	for _, r := range results {
		if r.First == 0 {
			check = append(check, "no boundary reached", "", "", "")
			continue
		}
		check = append(check, fmt.Sprintf("%.2f× — %v", r.Ratio, r.Held), "", "", "")
	}
	t.add(check...)
	t.note("`hookyard dev` of each layout on a database of its own, open-loop Chargebee deliveries at -soak-rate in windows of -soak-interval; after each window, pg_database_size, the sum of n_dead_tup over pg_stat_user_tables, webhook_inbox's row count, the window's HTTP answer p99 (from the scheduled send) and inbox p99 (processed_at − received_at of the window's events; n/a when the layout's inbox cannot say). A row marked (horizon) is the first sample at or after each multiple of the horizon. The soak starts, and so samples, a quarter of an interval (at most 15 s) past a multiple of the interval on the clock, where partitions begin: every sample is at the same point of a partition's life. Today's layout purges payloads every reconciler round (retention.payload_age = horizon, reconciler.interval = the shorter of -soak-interval and 10 s) and keeps identities, so its size grows; the new layout's config names the partition keys (retention.partition_interval = -soak-interval, history/dead_payload/payload/identity ages = horizon: `hookyard dev` allows an identity_age under the 4-day floor every other service keeps), and its fresh database starts with partitions of the interval (the migrations' first partitions, days wide and empty, dropped before the run).")
	b.addSideNotes(t, sides)
	t.data = map[string]any{"results": results}
	b.emit(t)
}

// ladderStep is one rate of the ladder.
type ladderStep struct {
	Run       *pipeRun `json:"run"`
	PGAll     float64  `json:"postgres_cpu_s"`
	PGOwn     float64  `json:"postgres_own_backends_cpu_s"`
	PerEvent  float64  `json:"postgres_cpu_per_event_s"`
	OwnPer    float64  `json:"postgres_own_backends_cpu_per_event_s"`
	DevPer    float64  `json:"dev_cpu_per_event_s"`
	Processed int64    `json:"events"`
}

type ladderResult struct {
	Side  string        `json:"side"`
	Steps []*ladderStep `json:"steps"`
	Best  float64       `json:"highest_rate_within_1s"`
	Err   string        `json:"error,omitempty"`
}

// storageLadder raises the rate by -storage-ladder-step from
// -storage-ladder-start until a rate misses (p99 over 1 s, or the receiver
// accepted less than 95% of it), on each layout; when the start misses, it
// halves the rate until one holds.
func (b *bench) storageLadder(ctx context.Context, sides []*storageSide) error {
	var results []*ladderResult
	defer func() { b.printLadder(sides, results) }()
	for _, s := range sides {
		r := &ladderResult{Side: s.key}
		results = append(results, r)
		if err := b.ladderSide(ctx, s, r); err != nil {
			r.Err = err.Error()
			if ctx.Err() != nil {
				return err
			}
		}
	}
	return nil
}

func (b *bench) ladderSide(ctx context.Context, s *storageSide, r *ladderResult) error {
	o := b.opts
	dbURL, cfgPath, auth, err := b.prepareSide(ctx, s, partLadder, o.soakHorizon, o.soakInterval, false)
	if err != nil {
		return err
	}
	p, err := b.startDev(ctx, devSpec{bin: s.bin, dbURL: dbURL, statistics: true, cfgPath: cfgPath, auth: auth,
		warmup: o.pipeWarmup, warmupRate: o.ladderStart})
	if err != nil {
		return err
	}
	defer p.close()
	// Upwards from the start until a rate misses; if the start already
	// misses (a busy machine), halving until one holds, as section D does.
	rate, down := o.ladderStart, false
	for range o.ladderMaxSteps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c0, err := postgresCPU(ctx, p.pool)
		if err != nil {
			return err
		}
		dev0 := readCPU(p.dev.pid())
		run, err := p.measure(ctx, s.label, "analyzed, autovacuum on", rate, o.ladderDuration, false)
		if err != nil {
			return err
		}
		c1, err := postgresCPU(ctx, p.pool)
		if err != nil {
			return err
		}
		dev1 := readCPU(p.dev.pid())
		st := &ladderStep{Run: run, Processed: run.Rows}
		st.PGAll, st.PGOwn = c1.since(c0)
		if run.Rows > 0 {
			st.PerEvent = st.PGAll / float64(run.Rows)
			st.OwnPer = st.PGOwn / float64(run.Rows)
			st.DevPer = (dev1.proc - dev0.proc) / float64(run.Rows)
		}
		r.Steps = append(r.Steps, st)
		var held, stop bool
		rate, held, stop = ladderNext(rate, o.ladderStep, run.ok(), len(r.Steps) == 1, &down)
		if held {
			r.Best = st.Run.Rate
		}
		if stop {
			return nil
		}
	}
	return nil
}

// ladderNext decides after a step at rate: upwards (×step) while rates
// hold, stopping at the first miss; when the first step misses, downwards
// (halving) until one holds. held says the step's rate counts as held.
func ladderNext(rate, step float64, ok, first bool, down *bool) (next float64, held, stop bool) {
	if first && !ok {
		*down = true
	}
	switch {
	case *down && ok:
		return rate, true, true
	case *down:
		return rate / 2, false, false
	case !ok:
		return rate, false, true
	default:
		return rate * step, true, false
	}
}

func (b *bench) printLadder(sides []*storageSide, results []*ladderResult) {
	if len(results) == 0 {
		return
	}
	t := newTable("S5. Rate ladder of each layout until a rate misses, with Postgres CPU per event",
		sideHeader("rate", sides[:len(results)], "accepted/s", "inbox p99", "PG CPU per event (all / own backends)", "dev CPU per event", "holds")...)
	var rates []float64
	for _, r := range results {
		for _, st := range r.Steps {
			if !slices.Contains(rates, st.Run.Rate) {
				rates = append(rates, st.Run.Rate)
			}
		}
	}
	slices.Sort(rates)
	us := func(s float64) string { return fmt.Sprintf("%.0f µs", s*1e6) }
	for _, rate := range rates {
		cells := []string{fmtRate(rate) + "/s"}
		for _, r := range results {
			i := slices.IndexFunc(r.Steps, func(st *ladderStep) bool { return st.Run.Rate == rate })
			if i < 0 {
				cells = append(cells, "—", "—", "—", "—", "—")
				continue
			}
			st := r.Steps[i]
			cells = append(cells, fmtRate(st.Run.AcceptRate), fmtDur(secs(st.Run.P99)), us(st.PerEvent)+" / "+us(st.OwnPer), us(st.DevPer), fmt.Sprint(st.Run.ok()))
		}
		t.add(cells...)
	}
	best := []string{"highest rate held"}
	for _, r := range results {
		c := "none held"
		if r.Best > 0 {
			c = fmtRate(r.Best) + "/s"
		}
		if r.Err != "" {
			c += " (stopped: " + r.Err + ")"
		}
		best = append(best, c, "", "", "", "")
	}
	t.add(best...)
	t.note("Section D's search on each layout, from -storage-ladder-start (%s/s) up by ×%.2f, %s a step, until a rate misses, or, when the first rate misses, halving it until one holds (a rate holds when every event is processed within the drain, no delivery failed, the receiver accepted ≥ 95%% of the rate and both inbox and HTTP p99 are ≤ 1 s) or after %d steps. Postgres CPU is utime+stime from /proc of the postmaster and every child (all: the whole server, shared with anything else on it) and of the backends connected to the layout's database at the step's end (own), per process between samples before and after each step (drain included; a process that ended in between is left out), divided by the step's events.",
		fmtRate(b.opts.ladderStart), b.opts.ladderStep, b.opts.ladderDuration, b.opts.ladderMaxSteps)
	b.addSideNotes(t, sides)
	t.data = map[string]any{"results": results}
	b.emit(t)
}
