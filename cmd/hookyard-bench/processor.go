package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

const (
	benchTopic = "hookyard.events"
	// chargebeeVersionBase looks like Chargebee's resource_version (ms).
	chargebeeVersionBase = 1_735_689_600_000
)

var (
	cbEndpoint = provider.Endpoint{ID: "cb-bench", Provider: provider.Chargebee, SourceAccount: "site",
		Environment: "test", Secrets: []string{"u:p"}}
	stripeBenchEndpoint = provider.Endpoint{ID: benchEndpoint, Provider: provider.Stripe, SourceAccount: benchAccount,
		Environment: "test", Secrets: []string{benchSecret}}
)

// benchEvent is one preloaded event: its inbox row and its Kafka record.
type benchEvent struct {
	id       string
	resource string
	version  *int64
	payload  string
}

// procResult is one processor run.
type procResult struct {
	path         string
	poll         int
	events       int
	wall         time.Duration // Run called → no pending row left
	startup      time.Duration // Run called → first row processed (100 ms resolution)
	timedOut     bool
	pendingLeft  int64
	byOutcome    map[string]int64 // status/outcome → rows
	projections  int64
	batches      uint64
	batchSeconds float64
	apiCalls     int64
	expectedOK   int64 // versioned: events that must apply
}

// processed counts the events that left pending.
func (r procResult) processed() int64 { return int64(r.events) - r.pendingLeft }

func (r procResult) rate() float64 {
	return float64(r.processed()) / r.wall.Seconds()
}

func (r procResult) steadyRate() float64 {
	if r.wall <= r.startup {
		return 0
	}
	return float64(r.processed()) / (r.wall - r.startup).Seconds()
}

func (r procResult) outcome(key string) int64 { return r.byOutcome[key] }

func (b *bench) processorSection(ctx context.Context) error {
	procPool, err := db.Open(ctx, b.opts.dbURL, db.Options{MaxConns: int32(b.opts.procConns)})
	if err != nil {
		return err
	}
	defer procPool.Close()
	if err := b.eachPoll(ctx, procPool, b.opts.skipVersioned, b.versionedRun, b.printVersioned); err != nil {
		return err
	}
	return b.eachPoll(ctx, procPool, b.opts.skipFetch, b.fetchRun, b.printFetched)
}

// eachPoll runs one processor path once per -poll-records value and prints
// the results side by side.
func (b *bench) eachPoll(ctx context.Context, pool *pgxpool.Pool, skip bool,
	run func(context.Context, *pgxpool.Pool, int) (procResult, error), print func([]procResult)) error {
	if skip {
		return nil
	}
	var results []procResult
	for _, poll := range b.opts.pollRecords {
		r, err := run(ctx, pool, poll)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	print(results)
	return nil
}

// arrivalOrder interleaves the resources' events at random while keeping
// each resource's own sequence, as one Kafka partition would deliver them.
func arrivalOrder(rng *rand.Rand, perResource [][]benchEvent) []benchEvent {
	var slots []int
	for i, evs := range perResource {
		for range evs {
			slots = append(slots, i)
		}
	}
	rng.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	next := make([]int, len(perResource))
	out := make([]benchEvent, 0, len(slots))
	for _, r := range slots {
		out = append(out, perResource[r][next[r]])
		next[r]++
	}
	return out
}

// spread gives resource i its share of n events.
func spread(n, resources, i int) int {
	k := n / resources
	if i < n%resources {
		k++
	}
	return k
}

// versionedEvents builds Chargebee snapshots: each subscription's versions
// grow, but each adjacent pair arrives swapped (v2, v1, v4, v3, …), so
// about half the events are stale when they arrive. It returns the events in
// arrival order and how many of them must apply.
func versionedEvents(rng *rand.Rand, n, resources int) ([]benchEvent, int64) {
	per := make([][]benchEvent, resources)
	var mustApply int64
	for i := range resources {
		k := spread(n, resources, i)
		order := make([]int, k)
		for j := range order {
			order[j] = j
		}
		for j := 0; j+1 < k; j += 2 {
			order[j], order[j+1] = order[j+1], order[j]
		}
		sub := "sub_" + strconv.Itoa(i)
		best := -1
		for _, j := range order {
			v := int64(chargebeeVersionBase + j*1000)
			id := fmt.Sprintf("ev_%s_%d", sub, j)
			payload := fmt.Sprintf(`{"id":%q,"event_type":"subscription_changed","content":{"subscription":{"id":%q,"status":"active","resource_version":%d}}}`, id, sub, v)
			per[i] = append(per[i], benchEvent{id: id, resource: sub, version: &v, payload: payload})
			if j > best {
				best = j
				mustApply++
			}
		}
	}
	return arrivalOrder(rng, per), mustApply
}

// hintEvents builds Stripe events without a version: each one only says
// "this subscription changed", and the processor fetches it.
func hintEvents(rng *rand.Rand, n, resources int) []benchEvent {
	per := make([][]benchEvent, resources)
	seq := 0
	for i := range resources {
		sub := "sub_" + strconv.Itoa(i)
		for range spread(n, resources, i) {
			id := "evt_hint_" + strconv.Itoa(seq)
			seq++
			payload := fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"livemode":false,"data":{"object":{"id":%q,"object":"subscription"}}}`, id, benchType, sub)
			per[i] = append(per[i], benchEvent{id: id, resource: sub, payload: payload})
		}
	}
	return arrivalOrder(rng, per)
}

// preload writes the inbox rows with COPY and produces one record per event,
// as the outbox relay would have.
func (b *bench) preload(ctx context.Context, brokers []string, ep provider.Endpoint, eventType string, evs []benchEvent) error {
	return b.preloadEvents(ctx, brokers, ep, eventType, evs, b.opts.analyze)
}

// preloadEvents is preload, with ANALYZE after the COPY when analyze.
func (b *bench) preloadEvents(ctx context.Context, brokers []string, ep provider.Endpoint, eventType string, evs []benchEvent, analyze bool) error {
	if err := copyPending(ctx, b.pool, ep, eventType, evs); err != nil {
		return err
	}
	if analyze {
		// Right after TRUNCATE and COPY the table has no statistics, and the
		// planner may pick a plan that is fine on a table it knows and ruinous
		// on this one; production tables are analyzed by autovacuum.
		if _, err := b.pool.Exec(ctx, `ANALYZE webhook_inbox`); err != nil {
			return fmt.Errorf("analyze inbox: %w", err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(benchTopic), kgo.MaxBufferedRecords(20_000))
	if err != nil {
		return fmt.Errorf("kafka producer: %w", err)
	}
	defer cl.Close()
	now := time.Now().UTC()
	const batch = 5_000
	recs := make([]*kgo.Record, 0, batch)
	for i, e := range evs {
		res := message.Resource{Provider: ep.Provider, SourceAccount: ep.SourceAccount, Environment: ep.Environment, Type: "subscription", ID: e.resource}
		v, err := json.Marshal(message.Message{Kind: message.KindEvent, Resource: res, EventID: e.id, EventType: eventType,
			EndpointID: ep.ID, EnqueuedAt: now, Reason: message.ReasonWebhook})
		if err != nil {
			return fmt.Errorf("encode message: %w", err)
		}
		recs = append(recs, &kgo.Record{Key: []byte(res.Key()), Value: v})
		if len(recs) == batch || i == len(evs)-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return fmt.Errorf("produce records: %w", err)
			}
			recs = recs[:0]
		}
	}
	return nil
}

func (b *bench) newCluster() (*kfake.Cluster, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(int32(b.opts.partitions), benchTopic))
	if err != nil {
		return nil, fmt.Errorf("start in-process kafka: %w", err)
	}
	return c, nil
}

func (b *bench) versionedRun(ctx context.Context, procPool *pgxpool.Pool, poll int) (procResult, error) {
	res := procResult{path: "versioned", poll: poll, events: b.opts.events}
	if err := b.truncate(ctx, truncateAllSQL); err != nil {
		return res, err
	}
	cluster, err := b.newCluster()
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	rng := rand.New(rand.NewPCG(b.opts.seed, uint64(poll)))
	evs, mustApply := versionedEvents(rng, b.opts.events, b.opts.resources)
	res.expectedOK = mustApply
	b.step("processor, versioned: preloading %s Chargebee events over %s subscriptions", fmtInt(int64(len(evs))), fmtInt(int64(b.opts.resources)))
	if err := b.preload(ctx, cluster.ListenAddrs(), cbEndpoint, "subscription_changed", evs); err != nil {
		return res, err
	}
	b.step("processor, versioned: MaxPollRecords=%d", poll)
	cfg := processor.Config{Brokers: cluster.ListenAddrs(), Topic: benchTopic, Group: "bench",
		Endpoints: []provider.Endpoint{cbEndpoint}, MaxPollRecords: poll}
	return b.runProcessor(ctx, procPool, cfg, res)
}

func (b *bench) fetchRun(ctx context.Context, procPool *pgxpool.Pool, poll int) (procResult, error) {
	res := procResult{path: "fetch", poll: poll, events: b.opts.hints}
	if err := b.truncate(ctx, truncateAllSQL); err != nil {
		return res, err
	}
	cluster, err := b.newCluster()
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	sim := stripesim.New(stripesim.Config{})
	for i := range b.opts.hintResources {
		sim.Put(stripesim.Subscription{ID: "sub_" + strconv.Itoa(i), Customer: "cus_" + strconv.Itoa(i), Status: "active"})
	}
	sim.SetLatency(b.opts.simLatency)
	srv := httptest.NewServer(sim)
	defer srv.Close()
	scfg := stripe.APIConfig{BaseURL: srv.URL, APIKey: stripesim.DevAPIKey, RatePerSecond: 100_000, Burst: 100_000}
	if n := b.opts.stripeIdleConns; n > 0 {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = n
		scfg.HTTPClient = &http.Client{Transport: tr}
		defer tr.CloseIdleConnections()
	}
	client := stripe.NewClient(scfg, b.log)

	rng := rand.New(rand.NewPCG(b.opts.seed, 1_000_000+uint64(poll)))
	evs := hintEvents(rng, b.opts.hints, b.opts.hintResources)
	b.step("processor, fetch: preloading %s Stripe hints over %s subscriptions", fmtInt(int64(len(evs))), fmtInt(int64(b.opts.hintResources)))
	if err := b.preload(ctx, cluster.ListenAddrs(), stripeBenchEndpoint, benchType, evs); err != nil {
		return res, err
	}
	b.step("processor, fetch: MaxPollRecords=%d, simulator latency %s", poll, b.opts.simLatency)
	cfg := processor.Config{Brokers: cluster.ListenAddrs(), Topic: benchTopic, Group: "bench",
		Endpoints: []provider.Endpoint{stripeBenchEndpoint}, MaxPollRecords: poll,
		Fetchers: map[string]provider.Fetcher{provider.Stripe: stripe.Fetcher{Client: client}}}
	res, err = b.runProcessor(ctx, procPool, cfg, res)
	res.apiCalls = sim.APICalls()
	return res, err
}

// runProcessor runs one processor until no inbox row is pending, polling the
// inbox every 100 ms from the bench's own pool.
func (b *bench) runProcessor(ctx context.Context, procPool *pgxpool.Pool, cfg processor.Config, res procResult) (procResult, error) {
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	cfg.InstanceID = "bench"
	cfg.RevokeGrace = 2 * time.Second
	p, err := processor.New(procPool, b.log, cfg)
	if err != nil {
		return res, err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- p.Run(runCtx) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	total := int64(res.events)
	var runErr error
	running := true
wait:
	for {
		select {
		case <-ctx.Done():
			return res, ctx.Err()
		case runErr = <-errc:
			running = false
			break wait
		case <-tick.C:
		}
		pending, err := b.count(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending'`)
		if err != nil {
			return res, err
		}
		if pending < total && res.startup == 0 {
			res.startup = time.Since(start)
		}
		res.pendingLeft = pending
		if pending == 0 {
			break
		}
		if time.Since(start) > b.opts.procTimeout {
			res.timedOut = true
			break
		}
	}
	res.wall = time.Since(start)
	cancel()
	if running {
		select {
		case runErr = <-errc:
		case <-time.After(30 * time.Second):
			runErr = errors.New("processor did not stop within 30s")
		}
	}
	if runErr != nil {
		return res, fmt.Errorf("processor run (%s, MaxPollRecords=%d): %w", res.path, res.poll, runErr)
	}
	if err := b.collect(ctx, reg, &res); err != nil {
		return res, err
	}
	return res, nil
}

func (b *bench) collect(ctx context.Context, reg *prometheus.Registry, res *procResult) error {
	rows, err := b.pool.Query(ctx, `SELECT status, coalesce(outcome, ''), count(*) FROM webhook_inbox GROUP BY 1, 2`)
	if err != nil {
		return fmt.Errorf("count outcomes: %w", err)
	}
	res.byOutcome = map[string]int64{}
	for rows.Next() {
		var status, outcome string
		var n int64
		if err := rows.Scan(&status, &outcome, &n); err != nil {
			rows.Close()
			return fmt.Errorf("count outcomes: %w", err)
		}
		res.byOutcome[status+"/"+outcome] += n
		res.byOutcome[outcome] += n
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("count outcomes: %w", err)
	}
	if res.projections, err = b.count(ctx, `SELECT count(*) FROM projection`); err != nil {
		return err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("gather processor metrics: %w", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hookyard_processor_batch_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			res.batches += m.GetHistogram().GetSampleCount()
			res.batchSeconds += m.GetHistogram().GetSampleSum()
		}
	}
	return nil
}

// otherStatuses summarises rows that did not end processed.
func otherStatuses(r procResult) string {
	var parts []string
	keys := make([]string, 0, len(r.byOutcome))
	for k := range r.byOutcome {
		if status, _, ok := strings.Cut(k, "/"); ok && status != "processed" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %s", fmtInt(r.byOutcome[k]), strings.TrimSuffix(k, "/")))
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}

func pollHeader(rs []procResult) []string {
	h := []string{"measure"}
	for _, r := range rs {
		h = append(h, fmt.Sprintf("poll=%d", r.poll))
	}
	return h
}

func addRow(t *table, rs []procResult, name string, f func(procResult) string) {
	cells := []string{name}
	for _, r := range rs {
		cells = append(cells, f(r))
	}
	t.add(cells...)
}

// addBatchRows shows how a partition's batch cost grows with its size; it
// should grow linearly.
func addBatchRows(t *table, rs []procResult) {
	addRow(t, rs, "partition batches (mean events, mean time)", func(r procResult) string {
		if r.batches == 0 {
			return "0"
		}
		return fmt.Sprintf("%s (%.0f, %s)", fmtInt(int64(r.batches)), float64(r.processed())/float64(r.batches),
			fmtDur(time.Duration(r.batchSeconds/float64(r.batches)*float64(time.Second))))
	})
	addRow(t, rs, "batch time per event", func(r procResult) string {
		if r.batches == 0 || r.processed() == 0 {
			return "n/a"
		}
		return fmtDur(time.Duration(r.batchSeconds / float64(r.processed()) * float64(time.Second)))
	})
}

func wallCell(r procResult) string {
	s := fmtDur(r.wall)
	if r.timedOut {
		s += fmt.Sprintf(" (TIMEOUT, %s pending)", fmtInt(r.pendingLeft))
	}
	return s
}

func (b *bench) printVersioned(rs []procResult) {
	t := newTable(fmt.Sprintf("B1. Processor, versioned snapshots (Chargebee): %s events over %s subscriptions, %d partitions",
		fmtInt(int64(b.opts.events)), fmtInt(int64(b.opts.resources)), b.opts.partitions), pollHeader(rs)...)
	addRow(t, rs, "events/s (wall, from Run)", func(r procResult) string { return fmtRate(r.rate()) })
	addRow(t, rs, "events/s after first progress", func(r procResult) string { return fmtRate(r.steadyRate()) })
	addRow(t, rs, "wall time", wallCell)
	addRow(t, rs, "startup (Run → first row processed)", func(r procResult) string { return fmtDur(r.startup) })
	addRow(t, rs, "applied (expected)", func(r procResult) string {
		return fmt.Sprintf("%s (%s)", fmtInt(r.outcome("processed/applied")), fmtInt(r.expectedOK))
	})
	addRow(t, rs, "stale", func(r procResult) string { return fmtInt(r.outcome("processed/stale")) })
	addRow(t, rs, "other outcomes / not processed", func(r procResult) string {
		other := int64(r.events) - r.outcome("processed/applied") - r.outcome("processed/stale")
		return fmt.Sprintf("%s / %s", fmtInt(other), otherStatuses(r))
	})
	addRow(t, rs, "projection rows", func(r procResult) string { return fmtInt(r.projections) })
	addBatchRows(t, rs)
	t.note("Inbox rows loaded with COPY and records produced straight to an in-process kfake topic (no receiver, no relay); one processor, pool of %d conns, wall time from processor.Run until no inbox row is pending (polled every 100 ms). Each subscription's versions arrive pairwise swapped, so the expected stale share is ~half.", b.opts.procConns)
	b.emit(t)
}

func (b *bench) printFetched(rs []procResult) {
	t := newTable(fmt.Sprintf("B2. Processor, Stripe hints with fetch: %s events over %s subscriptions, simulator latency %s",
		fmtInt(int64(b.opts.hints)), fmtInt(int64(b.opts.hintResources)), b.opts.simLatency), pollHeader(rs)...)
	addRow(t, rs, "events/s (wall, from Run)", func(r procResult) string { return fmtRate(r.rate()) })
	addRow(t, rs, "events/s after first progress", func(r procResult) string { return fmtRate(r.steadyRate()) })
	addRow(t, rs, "resources applied/s (projected / wall)", func(r procResult) string {
		return fmtRate(float64(r.projections) / r.wall.Seconds())
	})
	addRow(t, rs, "wall time", wallCell)
	addRow(t, rs, "startup (Run → first row processed)", func(r procResult) string { return fmtDur(r.startup) })
	addRow(t, rs, "API calls (simulator)", func(r procResult) string { return fmtInt(r.apiCalls) })
	addRow(t, rs, "API calls per event", func(r procResult) string { return fmt.Sprintf("%.3f", float64(r.apiCalls)/float64(r.events)) })
	addRow(t, rs, "fetched / not processed", func(r procResult) string {
		return fmt.Sprintf("%s / %s", fmtInt(r.outcome("processed/fetched")), otherStatuses(r))
	})
	addRow(t, rs, "projection rows", func(r procResult) string { return fmtInt(r.projections) })
	addBatchRows(t, rs)
	client := "its default transport (64 idle conns), as `hookyard processor`"
	if b.opts.stripeIdleConns > 0 {
		client = fmt.Sprintf("a transport keeping %d idle conns per host", b.opts.stripeIdleConns)
	}
	t.note("stripesim behind httptest, stripeapi client with %s, rate limit 100k/s. A partition's batch fetches each distinct subscription once (up to 8 at a time), with no transaction open; then writes in one transaction.", client)
	b.emit(t)
}
