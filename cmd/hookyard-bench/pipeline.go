package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookyard/hookyard/internal/testkit/freeport"
	"github.com/hookyard/hookyard/pkg/db"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
)

// Identities of the whole-pipeline section: one Chargebee endpoint.
const (
	pipeEndpoint = "cb-pipeline"
	pipeSite     = "bench-site"
	pipeUser     = "bench"
	// pipeGoal is the latency the rate search holds to.
	pipeGoal = time.Second
)

// pipeTables are the tables the "no statistics" run keeps autovacuum (and
// so auto-analyze) off on.
var pipeTables = []string{"webhook_inbox", "webhook_inbox_body", "outbox", "projection", "projection_history",
	"partition_fence", "topic_fence", "fact", "action"}

// pipeRun is one open-loop run through `hookyard dev`.
type pipeRun struct {
	Label       string  `json:"label"`
	Rate        float64 `json:"target_rate"`
	DurationSec float64 `json:"duration_s"`
	Statistics  string  `json:"statistics"`

	Sent       int64   `json:"sent"`
	SendRate   float64 `json:"send_rate"`
	Accepted   int64   `json:"accepted"`
	AcceptRate float64 `json:"accepted_rate"`
	HTTPErrors string  `json:"http_errors"`
	HTTPP50    float64 `json:"http_p50_s"`
	HTTPP99    float64 `json:"http_p99_s"`

	Rows      int64   `json:"inbox_rows"`
	Pending   int64   `json:"pending_after_drain"`
	P50       float64 `json:"p50_s"`
	P90       float64 `json:"p90_s"`
	P99       float64 `json:"p99_s"`
	P999      float64 `json:"p999_s"`
	Max       float64 `json:"max_s"`
	DrainSec  float64 `json:"drain_s"`
	Breakdown [3]pct  `json:"breakdown"` // received → produced, produced → fetched, fetched → processed
	Tapped    int64   `json:"tapped"`

	RelayBatchRows   float64          `json:"relay_rows_per_batch"`
	ProcBatchRecords float64          `json:"processor_records_per_batch"`
	ProcBatchMean    float64          `json:"processor_batch_mean_s"`
	ActiveBackends   float64          `json:"db_active_backends_mean"`
	BusyBackends     float64          `json:"db_busy_backends_mean"`
	OpenBackendsMax  int64            `json:"db_open_backends_max"`
	PingP50          float64          `json:"db_select1_p50_s"`
	PingP99          float64          `json:"db_select1_p99_s"`
	SeqScans         map[string]int64 `json:"seq_scan_rows_read"`
	ProducesPerSec   float64          `json:"kafka_produce_requests_per_s"`
	CommitsPerSec    float64          `json:"kafka_offset_commits_per_s"`
	DevCPU           float64          `json:"dev_cores"`
	BenchCPU         float64          `json:"bench_cores"`
	MachineBusy      float64          `json:"machine_busy_cores"`

	lat []time.Duration
}

// pct is p50 and p99 of one stage, in seconds.
type pct struct {
	P50 float64 `json:"p50_s"`
	P99 float64 `json:"p99_s"`
}

func (r *pipeRun) ok() bool {
	return r.Pending == 0 && r.HTTPErrors == "0" && r.P99 <= pipeGoal.Seconds() && r.HTTPP99 <= pipeGoal.Seconds() &&
		r.AcceptRate >= 0.95*r.Rate
}

// pipeline is `hookyard dev` running on a fresh database against a kfake
// cluster of the bench, with a tap consumer that notes when each record
// was produced and when a consumer could first fetch it.
type pipeline struct {
	b       *bench
	dbURL   string
	pool    *pgxpool.Pool
	dev     *receiverProc
	opsAddr string
	url     string
	auth    string
	tap     *tap
	stop    func()
	// produces and commits count the broker's Produce and OffsetCommit
	// requests: the relay's batches in flight and the processor's
	// synchronous offset commits (one per partition batch).
	produces, commits atomic.Int64
}

func (b *bench) pipelineSection(ctx context.Context) error {
	var runs []*pipeRun
	var best *pipeRun
	var searchErr error
	defer func() { b.printPipeline(runs, best, searchErr) }()

	// 1. From an empty database whose tables never get statistics.
	p, err := b.startPipeline(ctx, false)
	if err != nil {
		return err
	}
	r, err := p.measure(ctx, "fresh database, no statistics", "none (autovacuum off)", b.opts.pipeRate, b.opts.pipeDuration, true)
	if err == nil {
		var none bool
		if none, err = p.noStatistics(ctx); err == nil && !none {
			r.Statistics = "APPEARED (check failed)"
		}
	}
	p.close()
	if err != nil {
		return err
	}
	runs = append(runs, r)

	// 2. Analyzed after a warm-up, as autovacuum would have; then the rate
	// search goes on on the same services and database.
	if p, err = b.startPipeline(ctx, true); err != nil {
		return err
	}
	defer p.close()
	if r, err = p.measure(ctx, "analyzed", "ANALYZE after warm-up, autovacuum on", b.opts.pipeRate, b.opts.pipeDuration, true); err != nil {
		return err
	}
	runs = append(runs, r)
	if r.ok() {
		best = r
	}
	rates := b.opts.pipeRates
	if !r.ok() && len(rates) > 0 {
		// The fixed rate missed already: look below it instead.
		rates = []float64{b.opts.pipeRate / 2, b.opts.pipeRate / 4, b.opts.pipeRate / 8}
	}
	for _, rate := range rates {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r, err := p.measure(ctx, "search", "analyzed, autovacuum on", rate, b.opts.pipeSearchDuration, false)
		if err != nil {
			searchErr = err
			break
		}
		runs = append(runs, r)
		if r.ok() && (best == nil || r.Rate > best.Rate) {
			best = r
		}
		if r.ok() != (rate > b.opts.pipeRate) {
			break // upwards: the first miss; downwards: the first hold
		}
	}
	return nil
}

// pipelineDBURL is the bench database's URL with "_pipeline" appended to
// its name: a database this section drops and creates for every start.
func pipelineDBURL(base string) (string, string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", "", fmt.Errorf("parse -db: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return "", "", fmt.Errorf("-db %q names no database", redactURL(base))
	}
	name += "_pipeline"
	u.Path = "/" + name
	return u.String(), name, nil
}

func (b *bench) startPipeline(ctx context.Context, statistics bool) (*pipeline, error) {
	bin, err := b.hookyardBinary(ctx)
	if err != nil {
		return nil, err
	}
	dbURL, name, err := pipelineDBURL(b.opts.dbURL)
	if err != nil {
		return nil, err
	}
	return b.startDev(ctx, devSpec{bin: bin, dbURL: dbURL, dbName: name, fresh: true, statistics: statistics,
		warmup: b.opts.pipeWarmup, warmupRate: b.opts.pipeRate})
}

// devSpec says which `hookyard dev` to start, on which database, and how
// that database is prepared.
type devSpec struct {
	bin           string
	dbURL, dbName string
	// fresh drops and creates the database, then migrates it: with
	// binMigrate by `bin migrate` (the binary's own schema, which may not
	// be this checkout's), else by this checkout's migrations.
	fresh, binMigrate bool
	statistics        bool
	warmup            time.Duration
	warmupRate        float64
	// cfgPath and auth name a config written before (pipeConfig); empty:
	// one is written, with extraConfig appended to it.
	cfgPath, auth, extraConfig string
	cfgName                    string // file name of a config written here (default pipeline.yaml)
}

// pipeConfig writes the config of a `hookyard dev` or receiver of the
// pipeline sections to dir/name: one Chargebee endpoint with a random Basic
// secret, the bench topic, and extra (top-level YAML keys) appended. It
// returns the path and the Authorization header value deliveries carry.
func (b *bench) pipeConfig(dir, name, extra string) (path, auth string, err error) {
	var secret [12]byte
	_, _ = rand.Read(secret[:])
	pass := hex.EncodeToString(secret[:])
	auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(pipeUser+":"+pass))
	path = filepath.Join(dir, name)
	cfg := fmt.Sprintf(`endpoints:
  - id: %s
    provider: chargebee
    source_account: %s
    environment: test
    secrets: ["%s:%s"]
kafka:
  topic: %s
  partitions: %d
`, pipeEndpoint, pipeSite, pipeUser, pass, benchTopic, b.opts.partitions) + extra
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", "", fmt.Errorf("write pipeline config: %w", err)
	}
	return path, auth, nil
}

// workDir is where the bench writes configs: its temp dir, else $TMPDIR.
func (b *bench) workDir() string {
	if b.tmpDir != "" {
		return b.tmpDir
	}
	return os.TempDir()
}

// recreateDatabase drops name (the section's own database) and creates it.
func (b *bench) recreateDatabase(ctx context.Context, dbURL, name string) error {
	// Dropped through the bench database's own connection: the server is
	// the same, and this database is the section's alone.
	if _, err := b.pool.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop %s: %w", name, err)
	}
	if err := db.EnsureDatabase(ctx, dbURL, b.log); err != nil {
		return err
	}
	if sc := b.opts.pipeSyncCommit; sc != "" {
		// Set on the section's own database before any service connects.
		if _, err := b.pool.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET synchronous_commit = `+pgx.Identifier{sc}.Sanitize()); err != nil {
			return fmt.Errorf("set synchronous_commit on %s: %w", name, err)
		}
	}
	return nil
}

func (b *bench) startDev(ctx context.Context, s devSpec) (_ *pipeline, err error) {
	p := &pipeline{b: b, dbURL: s.dbURL}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if s.fresh {
		b.step("pipeline: fresh database %s", s.dbName)
		if err := b.recreateDatabase(ctx, s.dbURL, s.dbName); err != nil {
			return nil, err
		}
	}
	cfgPath := s.cfgPath
	p.auth = s.auth
	if cfgPath == "" {
		if cfgPath, p.auth, err = b.pipeConfig(b.workDir(), cmp.Or(s.cfgName, "pipeline.yaml"), s.extraConfig); err != nil {
			return nil, err
		}
	}
	if p.pool, err = db.Open(ctx, s.dbURL, db.Options{MaxConns: 2, ApplicationName: "hookyard-bench-pipeline"}); err != nil {
		return nil, err
	}
	if s.fresh {
		if s.binMigrate {
			err = binMigrate(ctx, s.bin, cfgPath, s.dbURL)
		} else {
			err = db.Migrate(ctx, p.pool, b.log)
		}
		if err != nil {
			return nil, err
		}
	}
	if !s.statistics {
		if err := stopAutovacuum(ctx, p.pool, pipeTables); err != nil {
			return nil, err
		}
	}

	cluster, err := b.newCluster()
	if err != nil {
		return nil, err
	}
	// Observe only: an unhandled control function lets kfake go on as usual.
	cluster.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		p.produces.Add(1)
		return nil, nil, false
	})
	cluster.ControlKey(int16(kmsg.OffsetCommit), func(kmsg.Request) (kmsg.Response, error, bool) {
		p.commits.Add(1)
		return nil, nil, false
	})
	tapCtx, stopTap := context.WithCancel(context.WithoutCancel(ctx))
	p.tap = &tap{seen: map[string]tapRec{}}
	tapDone := make(chan struct{})
	p.stop = func() {
		stopTap()
		<-tapDone
		cluster.Close()
	}
	tapCl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(benchTopic),
		kgo.FetchMaxWait(250*time.Millisecond)) // the processor's
	if err != nil {
		close(tapDone)
		return nil, fmt.Errorf("tap consumer: %w", err)
	}
	go func() {
		defer close(tapDone)
		defer tapCl.Close()
		p.tap.run(tapCtx, tapCl)
	}()

	var addrs [4]string
	for i := range addrs {
		if addrs[i], err = freeport.Addr(); err != nil {
			return nil, err
		}
	}
	p.opsAddr = addrs[1]
	b.step("pipeline: starting `hookyard dev` (receiver %s, ops %s, kfake %s)", addrs[0], addrs[1], strings.Join(cluster.ListenAddrs(), ","))
	p.dev, err = startHookyard(ctx, s.bin, cfgPath, "dev", addrs[0], b.opts.receiverLog, b.progress,
		"DATABASE_URL="+s.dbURL, "HTTP_ADDR="+addrs[0], "OPS_ADDR="+addrs[1], "SIM_ADDR="+addrs[2], "METRICS_ADDR="+addrs[3],
		"KAFKA_BROKERS="+strings.Join(cluster.ListenAddrs(), ","), "LOG_LEVEL=warn")
	if err != nil {
		return nil, err
	}
	p.url = "http://" + addrs[0] + "/webhooks/" + pipeEndpoint

	// Warm-up: connections open, the processor joins the group and takes
	// its fences; with statistics, ANALYZE then sees a table with rows.
	if w := s.warmup; w > 0 {
		b.step("pipeline: warm-up at %s/s, %s", fmtRate(s.warmupRate), w)
		cl := loadClient(b.opts.pipeWorkers)
		st := openLoop(ctx, cl, p.url, p.delivery("w_"), s.warmupRate, w, b.opts.pipeWorkers)
		cl.CloseIdleConnections()
		if st.accepted == 0 {
			return nil, fmt.Errorf("pipeline accepted nothing during warm-up: %s; log:\n%s", st.errorSummary(), p.dev.logTail())
		}
		if _, err := p.drain(ctx); err != nil {
			return nil, err
		}
	}
	if s.statistics {
		if err := analyze(ctx, p.pool, pipeTables); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *pipeline) close() {
	if p.dev != nil {
		p.dev.stop()
	}
	if p.stop != nil {
		p.stop()
	}
	if p.pool != nil {
		p.pool.Close()
	}
}

// delivery builds a Chargebee subscription snapshot: event n of the run
// (ids prefix+n) about one of -pipeline-subscriptions subscriptions, its
// resource_version the send time in ms as Chargebee's is.
func (p *pipeline) delivery(prefix string) func(n int) signedReq {
	subs := p.b.opts.pipeSubs
	return func(n int) signedReq {
		now := time.Now()
		b := make([]byte, 0, 256)
		b = append(b, `{"id":"`...)
		b = append(b, prefix...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, `","occurred_at":`...)
		b = strconv.AppendInt(b, now.Unix(), 10)
		b = append(b, `,"event_type":"subscription_changed","api_version":"v2","content":{"subscription":{"id":"sub_`...)
		b = strconv.AppendInt(b, int64(n%subs), 10)
		b = append(b, `","status":"active","plan_id":"basic-monthly","customer_id":"cus_`...)
		b = strconv.AppendInt(b, int64(n%subs), 10)
		b = append(b, `","resource_version":`...)
		b = strconv.AppendInt(b, now.UnixMilli(), 10)
		b = append(b, `}}}`...)
		return signedReq{body: b, sig: p.auth, header: chargebee.AuthorizationHeader}
	}
}

// drain waits until no inbox row is pending, or -pipeline-drain passed.
func (p *pipeline) drain(ctx context.Context) (int64, error) {
	deadline := time.Now().Add(p.b.opts.pipeDrain)
	for {
		var n int64
		if err := p.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending'`).Scan(&n); err != nil {
			return 0, fmt.Errorf("count pending: %w", err)
		}
		if n == 0 || time.Now().After(deadline) {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return n, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// measure sends rate events/s for d, waits for them to be processed and
// reads their latency from the inbox.
func (p *pipeline) measure(ctx context.Context, label, stats string, rate float64, d time.Duration, fixed bool) (*pipeRun, error) {
	b := p.b
	r := &pipeRun{Label: label, Rate: rate, DurationSec: d.Seconds(), Statistics: stats}
	prefix := fmt.Sprintf("m%d_%d_", int(rate), time.Now().UnixNano()%1_000_000)
	before, err := p.scrape(ctx)
	if err != nil {
		return nil, err
	}
	seq0, err := p.seqScans(ctx)
	if err != nil {
		return nil, err
	}
	cpu0 := readCPU(p.dev.pid())
	prod0, com0 := p.produces.Load(), p.commits.Load()
	b.step("pipeline, %s: %s/s open loop for %s", label, fmtRate(rate), d)
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan backendSample, 1)
	go func() { sampled <- p.sampleBackends(sampleCtx) }()
	cl := loadClient(b.opts.pipeWorkers)
	st := openLoop(ctx, cl, p.url, p.delivery(prefix), rate, d, b.opts.pipeWorkers)
	cl.CloseIdleConnections()
	stopSampling()
	bs := <-sampled
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if bs.n > 0 {
		r.ActiveBackends, r.BusyBackends = float64(bs.active)/float64(bs.n), float64(bs.busy)/float64(bs.n)
	}
	r.OpenBackendsMax = bs.maxOpen
	slices.Sort(bs.pings)
	r.PingP50, r.PingP99 = percentile(bs.pings, 0.5).Seconds(), percentile(bs.pings, 0.99).Seconds()
	cpu1 := readCPU(p.dev.pid())
	prod1, com1 := p.produces.Load(), p.commits.Load()
	drainStart := time.Now()
	if r.Pending, err = p.drain(ctx); err != nil {
		return nil, err
	}
	r.DrainSec = time.Since(drainStart).Seconds()
	seq1, err := p.seqScans(ctx)
	if err != nil {
		return nil, err
	}
	r.SeqScans = map[string]int64{}
	for t, n := range seq1 {
		if d := n - seq0[t]; d > 0 {
			r.SeqScans[t] = d
		}
	}
	after, err := p.scrape(ctx)
	if err != nil {
		return nil, err
	}
	r.Sent, r.Accepted = st.sent, st.accepted
	r.SendRate = float64(st.sent) / max(st.sendSpan.Seconds(), d.Seconds())
	r.AcceptRate = float64(st.accepted) / max(st.elapsed.Seconds(), d.Seconds())
	r.HTTPErrors = st.errorSummary()
	r.HTTPP50, r.HTTPP99 = percentile(st.lat, 0.5).Seconds(), percentile(st.lat, 0.99).Seconds()
	if el := cpu1.wall.Sub(cpu0.wall).Seconds(); el > 0 {
		r.DevCPU = (cpu1.proc - cpu0.proc) / el
		r.BenchCPU = (cpu1.self - cpu0.self) / el
		r.MachineBusy = (cpu1.busy - cpu0.busy) / el
		r.ProducesPerSec = float64(prod1-prod0) / el
		r.CommitsPerSec = float64(com1-com0) / el
	}
	delta := func(k string) float64 { return after[k] - before[k] }
	if n := delta("hookyard_outbox_batch_rows_count"); n > 0 {
		r.RelayBatchRows = delta("hookyard_outbox_batch_rows_sum") / n
	}
	if n := delta("hookyard_processor_batch_seconds_count"); n > 0 {
		r.ProcBatchRecords = delta("hookyard_processor_records_total") / n
		r.ProcBatchMean = delta("hookyard_processor_batch_seconds_sum") / n
	}
	if err := p.latencies(ctx, prefix, r); err != nil {
		return nil, err
	}
	b.step("pipeline, %s at %s/s: p50 %s, p99 %s, %d pending after drain", label, fmtRate(rate),
		fmtDur(secs(r.P50)), fmtDur(secs(r.P99)), r.Pending)
	return r, nil
}

// latencies reads processed_at - received_at of the run's events; one still
// pending counts with its age when the drain ended (a lower bound).
func (p *pipeline) latencies(ctx context.Context, prefix string, r *pipeRun) error {
	rows, err := p.pool.Query(ctx, `
SELECT event_id, received_at, coalesce(processed_at, clock_timestamp()) FROM webhook_inbox
WHERE endpoint_id = $1 AND event_id LIKE $2`, pipeEndpoint, prefix+"%")
	if err != nil {
		return fmt.Errorf("read latencies: %w", err)
	}
	var stages [3][]time.Duration
	for rows.Next() {
		var id string
		var recv, proc time.Time
		if err := rows.Scan(&id, &recv, &proc); err != nil {
			rows.Close()
			return fmt.Errorf("read latencies: %w", err)
		}
		r.lat = append(r.lat, proc.Sub(recv))
		if t, ok := p.tap.get(id); ok {
			stages[0] = append(stages[0], t.produced.Sub(recv))
			stages[1] = append(stages[1], t.fetched.Sub(t.produced))
			stages[2] = append(stages[2], proc.Sub(t.fetched))
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read latencies: %w", err)
	}
	r.Rows = int64(len(r.lat))
	r.Tapped = int64(len(stages[0]))
	slices.Sort(r.lat)
	r.P50, r.P90 = percentile(r.lat, 0.5).Seconds(), percentile(r.lat, 0.9).Seconds()
	r.P99, r.P999, r.Max = percentile(r.lat, 0.99).Seconds(), percentile(r.lat, 0.999).Seconds(), percentile(r.lat, 1).Seconds()
	for i, s := range stages {
		slices.Sort(s)
		r.Breakdown[i] = pct{P50: percentile(s, 0.5).Seconds(), P99: percentile(s, 0.99).Seconds()}
	}
	if r.Rows < r.Accepted {
		// An accepted event with no row would be a lost event: make it fail.
		r.Pending += r.Accepted - r.Rows
	}
	return nil
}

func (b *bench) printPipeline(runs []*pipeRun, best *pipeRun, searchErr error) {
	if len(runs) == 0 {
		return
	}
	head := []string{"measure"}
	for _, r := range runs {
		if r.Label == "search" {
			head = append(head, fmtRate(r.Rate)+"/s")
		} else {
			head = append(head, fmtRate(r.Rate)+"/s, "+r.Label)
		}
	}
	t := newTable(fmt.Sprintf("D. Whole pipeline (`hookyard dev`): open-loop Chargebee deliveries, latency processed_at − received_at from the inbox; goal p99 ≤ 100 ms at %s/s", fmtRate(b.opts.pipeRate)), head...)
	add := func(name string, f func(*pipeRun) string) {
		cells := []string{name}
		for _, r := range runs {
			cells = append(cells, f(r))
		}
		t.add(cells...)
	}
	add("statistics", func(r *pipeRun) string { return r.Statistics })
	add("run length", func(r *pipeRun) string { return fmtDur(secs(r.DurationSec)) })
	add("sent/s / accepted/s", func(r *pipeRun) string { return fmtRate(r.SendRate) + " / " + fmtRate(r.AcceptRate) })
	add("HTTP errors", func(r *pipeRun) string { return r.HTTPErrors })
	add("HTTP answer p50 / p99 (from scheduled send)", func(r *pipeRun) string {
		return fmtDur(secs(r.HTTPP50)) + " / " + fmtDur(secs(r.HTTPP99))
	})
	add("inbox rows / pending after drain", func(r *pipeRun) string {
		return fmtInt(r.Rows) + " / " + fmtInt(r.Pending)
	})
	add("latency p50", func(r *pipeRun) string { return fmtDur(secs(r.P50)) })
	add("latency p90", func(r *pipeRun) string { return fmtDur(secs(r.P90)) })
	add("latency p99", func(r *pipeRun) string { return fmtDur(secs(r.P99)) })
	add("latency p99.9 / max", func(r *pipeRun) string { return fmtDur(secs(r.P999)) + " / " + fmtDur(secs(r.Max)) })
	for i, name := range []string{"received → produced (relay) p50 / p99", "produced → fetchable (Kafka) p50 / p99", "fetched → processed_at (processor) p50 / p99"} {
		add(name, func(r *pipeRun) string {
			return fmtDur(secs(r.Breakdown[i].P50)) + " / " + fmtDur(secs(r.Breakdown[i].P99))
		})
	}
	add("relay rows per batch", func(r *pipeRun) string { return fmt.Sprintf("%.1f", r.RelayBatchRows) })
	add("processor records per batch / mean batch time", func(r *pipeRun) string {
		return fmt.Sprintf("%.1f / %s", r.ProcBatchRecords, fmtDur(secs(r.ProcBatchMean)))
	})
	add("dev's Postgres conns: mean active / mean busy (active or in transaction) / max open", func(r *pipeRun) string {
		return fmt.Sprintf("%.1f / %.1f / %d", r.ActiveBackends, r.BusyBackends, r.OpenBackendsMax)
	})
	add("bench's SELECT 1 round trip during the run p50 / p99", func(r *pipeRun) string {
		return fmtDur(secs(r.PingP50)) + " / " + fmtDur(secs(r.PingP99))
	})
	add("rows read by sequential scans during the run", func(r *pipeRun) string {
		var parts []string
		for _, t := range pipeTables {
			if n := r.SeqScans[t]; n > 0 {
				parts = append(parts, t+" "+fmtInt(n))
			}
		}
		if len(parts) == 0 {
			return "0"
		}
		return strings.Join(parts, ", ")
	})
	add("Kafka requests/s: produce / offset commit", func(r *pipeRun) string {
		return fmtRate(r.ProducesPerSec) + " / " + fmtRate(r.CommitsPerSec)
	})
	add("CPU cores: hookyard dev / bench (load, kfake) / machine", func(r *pipeRun) string {
		return fmt.Sprintf("%.2f / %.2f / %.2f", r.DevCPU, r.BenchCPU, r.MachineBusy)
	})
	add("within goal (p99 ≤ 1 s, all processed, no errors)", func(r *pipeRun) string { return fmt.Sprint(r.ok()) })
	bestCell := "none held"
	if best != nil {
		bestCell = fmt.Sprintf("%s events/s (p99 %s)", fmtRate(best.Rate), fmtDur(secs(best.P99)))
		if last := runs[len(runs)-1]; last == best && best.Rate > b.opts.pipeRate {
			bestCell = "at least " + bestCell + ", the highest rate tried"
		}
	}
	t.note("Highest sustained rate with p99 ≤ 1 s: %s (rates tried in turn, %s each, upwards from the fixed rate until one misses, or downwards until one holds if the fixed rate missed; a rate holds when every event is processed within the drain, no delivery failed, the receiver accepted ≥ 95%% of the rate and both the inbox p99 and the HTTP p99 are ≤ 1 s).",
		bestCell, b.opts.pipeSearchDuration)
	if searchErr != nil {
		t.note("The rate search stopped on an error: %v", searchErr)
	}
	t.note("`hookyard dev` as a subprocess (every service in one process, one pool of 24 conns) on a database created for the section, KAFKA_BROKERS at a kfake cluster (%d partitions) inside the bench, which also runs the load: %d keep-alive senders, deliveries released on a fixed schedule whatever the answers (open loop), each a Chargebee subscription snapshot (Basic auth, resource_version the send time in ms) over %s subscriptions. Each fixed-rate run starts on a database created for it, after a %s warm-up at its rate (not measured): the first with autovacuum off on every table (no statistics ever; checked after the run), the second analyzed after the warm-up; the search runs on the second's database and services. processed_at is the processor's transaction start and received_at the receiver's, so the figure leaves out the processor's own write (see its batch time). The stages come from a second consumer of the topic (no group, the processor's 250 ms fetch wait): the record's producer timestamp and the time it was fetched.",
		b.opts.partitions, b.opts.pipeWorkers, fmtInt(int64(b.opts.pipeSubs)), b.opts.pipeWarmup)
	data := map[string]any{"runs": runs}
	if best != nil {
		data["highest_rate_within_1s"] = best.Rate
	}
	t.data = data
	b.emit(t)
}

// existingTables keeps the tables of names that exist: an older layout's
// schema (the storage section's baseline) has no webhook_inbox_body.
func existingTables(ctx context.Context, pool *pgxpool.Pool, names []string) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT n FROM unnest($1::text[]) WITH ORDINALITY u(n, i) WHERE to_regclass(n) IS NOT NULL ORDER BY i`, names)
	if err != nil {
		return nil, fmt.Errorf("look for tables: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// analyze runs ANALYZE on those of tables that exist.
func analyze(ctx context.Context, pool *pgxpool.Pool, tables []string) error {
	have, err := existingTables(ctx, pool, tables)
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `ANALYZE `+strings.Join(have, ", ")); err != nil {
		return fmt.Errorf("analyze: %w", err)
	}
	return nil
}
