// Command hookyard-bench measures hookyard on the machine it runs on and
// prints tables:
//
//   - receiver: what Postgres can commit (pgbench running the receiver's own
//     two-row transaction) against what the receiver accepts over HTTP, its
//     latency at half of that peak and its peak memory;
//   - processor: events per second through the processor, for versioned
//     snapshots (Chargebee) and for hints that fetch the resource (Stripe,
//     against the simulator);
//   - processor by inbox size: events per second on inboxes of 10k and 1M
//     rows, on tables without statistics and analyzed; the cost per event
//     must not grow with the inbox;
//   - relay: rows per second from a preloaded outbox to Kafka, with one and
//     two relays, beside Postgres alone claiming and deleting the rows;
//   - pipeline: `hookyard dev` from an empty database under open-loop
//     signed Chargebee deliveries, latency processed_at - received_at from
//     the inbox, without statistics and analyzed, and the highest rate that
//     keeps p99 within a second;
//   - storage (-storage, not in the default run): today's layout, the
//     binary of a git revision, against this checkout's on the same
//     traffic: bytes and WAL per event, a retention pass at 10M rows, a
//     soak under a short horizon, and each layout's rate ladder.
//
// Every table also goes to bench-results/<start time>.json with the flags
// and the machine, so that runs can be compared.
//
// It works in its own database (hookyard_bench by default) and truncates its
// tables between phases; it never touches the development database. Numbers
// are only as quiet as the machine: anything else running skews them.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/db"
)

// DBURLDefault is the bench's own database; it is created when missing.
const DBURLDefault = "postgres://postgres@127.0.0.1:5432/hookyard_bench?sslmode=disable"

// options are the command line.
type options struct {
	receiver, processor, relay bool
	inbox, pipeline            bool
	storage                    bool

	storageParts        map[string]bool
	storageQuick        bool
	storageBaselineRev  string
	storageBaselineBin  string
	storageEvents       int
	storageIntakeRate   float64
	storageDrain        time.Duration
	storagePurgeRows    int
	storageRetentionCmd string
	storageBodyTables   string
	storageSides        map[string]bool
	storageNewConfig    string
	soakRate            float64
	soakDuration        time.Duration
	soakHorizon         time.Duration
	soakInterval        time.Duration
	ladderStart         float64
	ladderStep          float64
	ladderDuration      time.Duration
	ladderMaxSteps      int

	args       []string          // the command line, for the results file
	flags      map[string]string // every flag's value, defaults included
	resultsDir string

	pipeDuration, pipeSearchDuration time.Duration
	pipeWarmup, pipeDrain            time.Duration
	pipeRate                         float64
	pipeRates                        []float64
	pipeWorkers                      int
	pipeSubs                         int
	pipeSyncCommit                   string

	dbURL       string
	duration    time.Duration
	concurrency int
	pgbench     string
	bin         string

	events, resources        int
	hints, hintResources     int
	simLatency               time.Duration
	pollRecords              []int
	partitions               int
	procConns                int
	procTimeout              time.Duration
	stripeIdleConns          int
	seed                     uint64
	skipFetch, skipVersioned bool
	analyze                  bool
	receiverLog              bool
	commitWorkers            int

	inboxRows   []int
	inboxEvents int

	relayRows, relayPayload   int
	relayBatch, relayInFlight int
	relayTimeout              time.Duration
	cpuProfile                string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("hookyard-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.BoolVar(&o.receiver, "receiver", false, "run section A: receiver vs the Postgres ceiling (default: all sections)")
	fs.BoolVar(&o.processor, "processor", false, "run section B: processor throughput (default: all sections)")
	fs.BoolVar(&o.relay, "relay", false, "run section C: outbox relay throughput vs the Postgres ceiling (default: all sections)")
	fs.BoolVar(&o.pipeline, "pipeline", false, "run section D: the whole pipeline (`hookyard dev`) under open-loop signed load, latency from the inbox (default: all sections)")
	fs.Float64Var(&o.pipeRate, "pipeline-rate", 1000, "D: events/s of the two fixed-rate runs (fresh database without statistics, then analyzed)")
	fs.DurationVar(&o.pipeDuration, "pipeline-duration", 60*time.Second, "D: length of each fixed-rate run")
	pipeRates := fs.String("pipeline-rates", "1500,2000,2500,3000,4000,5000", "D: rates tried in turn after the analyzed run, on its database, until one misses p99 ≤ 1 s; the highest that held is printed (if the fixed rate missed, half, a quarter and an eighth of it are tried instead)")
	fs.DurationVar(&o.pipeSearchDuration, "pipeline-search-duration", 20*time.Second, "D: length of each run of the rate search")
	fs.DurationVar(&o.pipeWarmup, "pipeline-warmup", 5*time.Second, "D: open-loop load at the run's rate before the measured runs (not measured)")
	fs.DurationVar(&o.pipeDrain, "pipeline-drain", 30*time.Second, "D: how long after a run's last delivery its events may take to be processed; one still pending counts as late")
	fs.IntVar(&o.pipeWorkers, "pipeline-workers", 128, "D: concurrent HTTP senders (keep-alive connections) of the open loop")
	fs.IntVar(&o.pipeSubs, "pipeline-subscriptions", 10_000, "D: distinct Chargebee subscriptions the events are about")
	fs.StringVar(&o.pipeSyncCommit, "pipeline-synchronous-commit", "", "D: synchronous_commit for the section's database (ALTER DATABASE … SET; empty: the server's), to see what a commit's WAL flush costs")
	fs.BoolVar(&o.storage, "storage", false, "run section S: today's storage layout (the binary of -storage-baseline-rev) against this checkout's, side by side: bytes and WAL per event, a retention pass at -storage-purge-rows, a soak with a short horizon, a rate ladder (about two hours; not part of the default run)")
	partsFlag := fs.String("storage-parts", strings.Join(storageParts, ","), "S: the parts to run, comma-separated: traffic (bytes and WAL per event), purge (retention pass at -storage-purge-rows), soak, ladder")
	fs.BoolVar(&o.storageQuick, "storage-quick", false, "S: everything small, to check the harness in minutes: 10k events, 1M-row purge, 3-minute soak with a 1-minute horizon and 1-minute partitions, 10 s ladder steps (flags given explicitly still win)")
	fs.StringVar(&o.storageBaselineRev, "storage-baseline-rev", "2092dc9", "S: git revision of today's layout; its binary is built once (git archive, go build) into $TMPDIR/hookyard-bench-rev/<commit>")
	fs.StringVar(&o.storageBaselineBin, "storage-baseline-bin", "", "S: a prebuilt binary of today's layout instead of building -storage-baseline-rev")
	fs.IntVar(&o.storageEvents, "storage-events", 100_000, "S traffic: Chargebee deliveries through each layout")
	fs.Float64Var(&o.storageIntakeRate, "storage-intake-rate", 2000, "S traffic: open-loop rate of the deliveries to the receiver alone")
	fs.DurationVar(&o.storageDrain, "storage-drain", 10*time.Minute, "S traffic: how long `hookyard dev` may take to process the backlog")
	fs.IntVar(&o.storagePurgeRows, "storage-purge-rows", 10_000_000, "S purge: inbox rows filled by SQL into each layout before its retention pass")
	fs.StringVar(&o.storageRetentionCmd, "storage-retention-cmd", "retention", "S: the new binary's retention command and its arguments (run with its config, whose retention keys hold the horizons); a binary without it runs today's `purge -older-than`")
	fs.StringVar(&o.storageBodyTables, "storage-body-tables", "webhook_inbox_body", "S purge: comma-separated tables the fill writes beside webhook_inbox where they exist (the new layout's bodies)")
	sidesFlag := fs.String("storage-sides", "today,new", "S: the layouts to run, comma-separated: today (the baseline binary), new (this checkout's); one alone halves a part's time, its tables then have its columns only")
	fs.StringVar(&o.storageNewConfig, "storage-new-config", "", "S: YAML file appended to the new side's config instead of the generated retention keys")
	fs.Float64Var(&o.soakRate, "soak-rate", 1000, "S soak: steady events/s (2 cores sustain 4,000/s in section D; 1,000/s leaves room for retention)")
	fs.DurationVar(&o.soakDuration, "soak-duration", 20*time.Minute, "S soak: length of each layout's soak")
	fs.DurationVar(&o.soakHorizon, "soak-horizon", 3*time.Minute, "S: retention horizon (payload, identity, history ages) of the soak, the traffic's and the purge's retention passes")
	fs.DurationVar(&o.soakInterval, "soak-interval", time.Minute, "S: partition interval of the new layout, the reconciler's interval and the soak's sample window")
	fs.Float64Var(&o.ladderStart, "storage-ladder-start", 4000, "S ladder: first rate (events/s)")
	fs.Float64Var(&o.ladderStep, "storage-ladder-step", 1.25, "S ladder: factor between rates")
	fs.DurationVar(&o.ladderDuration, "storage-ladder-duration", 20*time.Second, "S ladder: length of each step")
	fs.IntVar(&o.ladderMaxSteps, "storage-ladder-max-steps", 12, "S ladder: give up after this many rates")
	fs.StringVar(&o.resultsDir, "results-dir", "bench-results", "write every table, the flags and the machine to DIR/<start time>.json (empty: no file)")
	fs.BoolVar(&o.inbox, "inbox", false, "run section B3: processor events/s at each -inbox-rows inbox size, without statistics and analyzed (default: all sections)")
	inboxRows := fs.String("inbox-rows", "10000,1000000", "B3: comma-separated inbox sizes (finished events preloaded with generate_series) to measure the processor on")
	fs.IntVar(&o.inboxEvents, "inbox-events", 20_000, "B3: new events processed at each inbox size, once without statistics and once analyzed")
	fs.IntVar(&o.relayRows, "relay-rows", 200_000, "relay: outbox rows preloaded for each run")
	fs.IntVar(&o.relayPayload, "relay-payload", 1024, "relay: bytes of random payload per row")
	fs.IntVar(&o.relayBatch, "relay-batch", 0, "relay: rows per claim (0: the relay's default)")
	fs.IntVar(&o.relayInFlight, "relay-inflight", 0, "relay: batches in flight per relay (0: the relay's default)")
	fs.DurationVar(&o.relayTimeout, "relay-timeout", 2*time.Minute, "relay: give up on a run after this long")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the bench process (relays, kfake, load generators) to this file")
	fs.StringVar(&o.dbURL, "db", envOr("HOOKYARD_BENCH_DATABASE_URL", DBURLDefault), "bench database URL (created, migrated and truncated; never the dev database)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each timed receiver phase (pgbench c=1, pgbench c=C, receiver closed loop, receiver at half load)")
	fs.IntVar(&o.concurrency, "concurrency", 16, "pgbench clients and receiver load workers (C)")
	fs.IntVar(&o.commitWorkers, "commit-workers", 0, "receiver group-commit workers (0: the receiver's default)")
	fs.StringVar(&o.pgbench, "pgbench", "pgbench", "pgbench executable")
	fs.StringVar(&o.bin, "bin", "", "prebuilt hookyard binary (default: go build the module root into a temp dir)")
	fs.IntVar(&o.events, "events", 100_000, "versioned path: Chargebee events preloaded")
	fs.IntVar(&o.resources, "resources", 10_000, "versioned path: distinct subscriptions the events touch")
	fs.IntVar(&o.hints, "hints", 20_000, "fetch path: Stripe hint events preloaded")
	fs.IntVar(&o.hintResources, "hint-resources", 2_000, "fetch path: distinct subscriptions the hints touch")
	fs.DurationVar(&o.simLatency, "sim-latency", 5*time.Millisecond, "fetch path: latency the Stripe simulator adds to each API call")
	polls := fs.String("poll-records", "1000,5000", "comma-separated processor MaxPollRecords values; each path runs once per value")
	fs.IntVar(&o.partitions, "partitions", 12, "partitions of the in-process topic")
	fs.IntVar(&o.procConns, "proc-conns", 4, "processor pool size (hookyard processor uses 4)")
	fs.BoolVar(&o.analyze, "analyze", true, "ANALYZE webhook_inbox after each processor preload, as autovacuum would have in steady state; with -analyze=false a never-analyzed database shows the planner's choice on a table without statistics")
	fs.DurationVar(&o.procTimeout, "proc-timeout", 30*time.Second, "give up on a processor run after this long")
	fs.IntVar(&o.stripeIdleConns, "stripe-idle-conns", 0, "fetch path: idle keep-alive conns of the Stripe client's transport; 0 keeps the stripeapi default (64 idle conns), as hookyard processor")
	seed := fs.Uint64("seed", 1, "seed of the arrival-order shuffle")
	fs.BoolVar(&o.skipVersioned, "no-versioned", false, "skip the processor's versioned path")
	fs.BoolVar(&o.skipFetch, "no-fetch", false, "skip the processor's fetch path")
	fs.BoolVar(&o.receiverLog, "receiver-log", false, "pass the receiver subprocess's log through to stderr")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	o.seed = *seed
	o.args = args
	if o.storageQuick {
		// Through the flag set, so that the results file shows the values
		// the run used.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range storageQuickValues {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return o, fmt.Errorf("-storage-quick: %s: %w", name, err)
				}
			}
		}
	}
	o.storageSides = map[string]bool{}
	for _, n := range strings.Split(*sidesFlag, ",") {
		switch n = strings.TrimSpace(n); n {
		case "today", "new":
			o.storageSides[n] = true
		case "":
		default:
			return o, fmt.Errorf("-storage-sides: unknown layout %q (today, new)", n)
		}
	}
	if o.storage && len(o.storageSides) == 0 {
		return o, errors.New("-storage-sides needs at least one layout")
	}
	o.storageParts = map[string]bool{}
	for _, s := range strings.Split(*partsFlag, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(storageParts, s) {
			return o, fmt.Errorf("-storage-parts: %q is none of %s", s, strings.Join(storageParts, ", "))
		}
		o.storageParts[s] = true
	}
	o.flags = map[string]string{}
	fs.VisitAll(func(f *flag.Flag) { o.flags[f.Name] = f.Value.String() })
	if !o.receiver && !o.processor && !o.relay && !o.inbox && !o.pipeline && !o.storage {
		o.receiver, o.processor, o.relay, o.inbox, o.pipeline = true, true, true, true, true
	}
	for _, s := range strings.Split(*pipeRates, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			return o, fmt.Errorf("-pipeline-rates: %q is not a positive number", s)
		}
		o.pipeRates = append(o.pipeRates, v)
	}
	o.relayBatch = cmp.Or(o.relayBatch, outboxrelay.BatchSizeDefault)
	o.relayInFlight = cmp.Or(o.relayInFlight, outboxrelay.InFlightDefault)
	for _, s := range strings.Split(*polls, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return o, fmt.Errorf("-poll-records: %q is not a positive integer", s)
		}
		o.pollRecords = append(o.pollRecords, n)
	}
	for _, s := range strings.Split(*inboxRows, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return o, fmt.Errorf("-inbox-rows: %q is not a positive integer", s)
		}
		o.inboxRows = append(o.inboxRows, n)
	}
	switch {
	case o.duration < time.Second:
		return o, errors.New("-duration must be at least 1s")
	case o.concurrency < 1:
		return o, errors.New("-concurrency must be at least 1")
	case len(o.pollRecords) == 0:
		return o, errors.New("-poll-records needs at least one value")
	case o.resources < 1 || o.events < o.resources:
		return o, errors.New("-events must be at least -resources, and -resources at least 1")
	case o.hintResources < 1 || o.hints < o.hintResources:
		return o, errors.New("-hints must be at least -hint-resources, and -hint-resources at least 1")
	case o.partitions < 1:
		return o, errors.New("-partitions must be at least 1")
	case o.relayRows < 1 || o.relayPayload < 4 || o.relayBatch < 1 || o.relayInFlight < 1:
		return o, errors.New("-relay-rows, -relay-batch and -relay-inflight must be positive, -relay-payload at least 4")
	case o.inbox && (len(o.inboxRows) == 0 || o.inboxEvents < 1):
		return o, errors.New("-inbox-rows needs at least one size and -inbox-events must be positive")
	case o.procConns < 1:
		return o, errors.New("-proc-conns must be at least 1")
	case o.pipeRate <= 0 || o.pipeDuration < time.Second || o.pipeSearchDuration < time.Second:
		return o, errors.New("-pipeline-rate must be positive, -pipeline-duration and -pipeline-search-duration at least 1s")
	case o.pipeWorkers < 1 || o.pipeSubs < 1 || o.pipeDrain < time.Second || o.pipeWarmup < 0:
		return o, errors.New("-pipeline-workers and -pipeline-subscriptions must be positive, -pipeline-drain at least 1s, -pipeline-warmup not negative")
	case o.storage && len(o.storageParts) == 0:
		return o, errors.New("-storage-parts needs at least one part")
	case o.storageEvents < 1 || o.storageIntakeRate <= 0 || o.storagePurgeRows < 1 || o.soakRate <= 0:
		return o, errors.New("-storage-events, -storage-intake-rate, -storage-purge-rows and -soak-rate must be positive")
	case o.soakInterval < time.Second || o.soakHorizon < o.soakInterval || o.soakDuration < o.soakInterval:
		return o, errors.New("-soak-interval must be at least 1s, -soak-horizon and -soak-duration at least -soak-interval")
	case o.storage && (o.soakInterval < time.Minute || o.soakInterval%time.Minute != 0):
		return o, errors.New("-soak-interval is the new layout's retention.partition_interval: a whole number of minutes, at least 1m")
	case o.ladderStart <= 0 || o.ladderStep <= 1 || o.ladderDuration < time.Second || o.ladderMaxSteps < 1:
		return o, errors.New("-storage-ladder-start must be positive, -storage-ladder-step above 1, -storage-ladder-duration at least 1s, -storage-ladder-max-steps at least 1")
	}
	return o, nil
}

// storageQuickValues are the flags -storage-quick sets when they are not
// given: the whole storage section in about 20 minutes.
var storageQuickValues = map[string]string{
	"storage-events":           "10000",
	"storage-purge-rows":       "1000000",
	"soak-duration":            "3m",
	"soak-horizon":             "1m",
	"soak-interval":            "1m",
	"storage-ladder-start":     "2000",
	"storage-ladder-duration":  "10s",
	"storage-ladder-max-steps": "4",
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "hookyard-bench:", err)
		return 2
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "hookyard-bench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "hookyard-bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	b := &bench{opts: o, out: stdout, progress: stderr, log: slog.New(slog.DiscardHandler)}
	start := time.Now()
	runErr := b.run(ctx)
	defer b.cleanup()
	if o.resultsDir != "" && len(b.tables) > 0 {
		// Written even when a section failed: the others' numbers stand.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		path, err := b.writeResults(wctx, o.resultsDir, start, runErr)
		cancel()
		if err != nil {
			fmt.Fprintln(stderr, "hookyard-bench:", err)
		} else {
			b.step("results written to %s", path)
		}
	}
	if runErr != nil {
		fmt.Fprintln(stderr, "hookyard-bench:", runErr)
		return 1
	}
	b.step("done in %s", time.Since(start).Round(time.Second))
	return 0
}

// bench holds what every section shares.
type bench struct {
	opts     options
	out      io.Writer // tables
	progress io.Writer // what is running now
	log      *slog.Logger
	pool     *pgxpool.Pool // administration: truncates, COPY, counts
	tables   []*table      // printed so far, for the results file

	machineInfo *machineInfo // read once, while the pool is open

	tmpDir string // holds the hookyard binary when the bench built it
	binary string

	walInspect int // pg_walinspect in the bench database: 0 not tried, 1 there, -1 not available
}

// hookyardBinary returns -bin, or builds the module root's binary once.
func (b *bench) hookyardBinary(ctx context.Context) (string, error) {
	if b.opts.bin != "" {
		return b.opts.bin, nil
	}
	if b.binary != "" {
		return b.binary, nil
	}
	dir, err := os.MkdirTemp("", "hookyard-bench-bin-")
	if err != nil {
		return "", fmt.Errorf("temp dir: %w", err)
	}
	b.tmpDir = dir
	b.step("building the hookyard binary")
	if b.binary, err = buildHookyard(ctx, dir); err != nil {
		return "", err
	}
	return b.binary, nil
}

func (b *bench) cleanup() {
	if b.tmpDir != "" {
		_ = os.RemoveAll(b.tmpDir)
	}
}

// step reports progress on stderr so that stdout holds only the tables.
func (b *bench) step(format string, a ...any) {
	fmt.Fprintf(b.progress, "› "+format+"\n", a...)
}

func (b *bench) run(ctx context.Context) error {
	if err := db.EnsureDatabase(ctx, b.opts.dbURL, b.log); err != nil {
		return err
	}
	pool, err := db.Open(ctx, b.opts.dbURL, db.Options{MaxConns: 4})
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool, b.log); err != nil {
		return err
	}
	b.pool = pool
	// A run stopped during pgbench leaves the trigger off; every section
	// but pgbench's ceiling runs with it, as hookyard does.
	if err := b.setNotifyTrigger(ctx, true); err != nil {
		return err
	}
	if err := b.printEnvironment(ctx); err != nil {
		return err
	}
	var errs []error
	if b.opts.receiver {
		if err := b.receiverSection(ctx); err != nil {
			errs = append(errs, fmt.Errorf("receiver section: %w", err))
		}
	}
	if b.opts.processor && ctx.Err() == nil {
		if err := b.processorSection(ctx); err != nil {
			errs = append(errs, fmt.Errorf("processor section: %w", err))
		}
	}
	if b.opts.inbox && ctx.Err() == nil {
		if err := b.inboxSection(ctx); err != nil {
			errs = append(errs, fmt.Errorf("inbox size section: %w", err))
		}
	}
	if b.opts.relay && ctx.Err() == nil {
		if err := b.relaySection(ctx); err != nil {
			errs = append(errs, fmt.Errorf("relay section: %w", err))
		}
	}
	if b.opts.pipeline && ctx.Err() == nil {
		if err := b.pipelineSection(ctx); err != nil {
			errs = append(errs, fmt.Errorf("pipeline section: %w", err))
		}
	}
	if b.opts.storage && ctx.Err() == nil {
		if err := b.storageSection(ctx); err != nil {
			errs = append(errs, fmt.Errorf("storage section: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (b *bench) printEnvironment(ctx context.Context) error {
	var version, syncCommit string
	if err := b.pool.QueryRow(ctx, `SELECT split_part(version(), ' on ', 1), current_setting('synchronous_commit')`).Scan(&version, &syncCommit); err != nil {
		return fmt.Errorf("read server version: %w", err)
	}
	b.machine(ctx) // kept for the results file: the pool is closed when it is written
	t := newTable("hookyard-bench", "setting", "value")
	t.add("cpus (GOMAXPROCS)", fmt.Sprintf("%d (%d)", runtime.NumCPU(), runtime.GOMAXPROCS(0)))
	t.add("go", runtime.Version())
	t.add("postgres", version)
	t.add("synchronous_commit", syncCommit)
	t.add("database", redactURL(b.opts.dbURL))
	t.add("duration per receiver phase", b.opts.duration.String())
	t.add("concurrency C", strconv.Itoa(b.opts.concurrency))
	b.emit(t)
	return nil
}

// redactURL drops a password, if any, from a database URL.
func redactURL(s string) string {
	at := strings.LastIndex(s, "@")
	scheme := strings.Index(s, "://")
	if at < 0 || scheme < 0 {
		return s
	}
	user := s[scheme+3 : at]
	if name, _, ok := strings.Cut(user, ":"); ok {
		return s[:scheme+3] + name + ":***" + s[at:]
	}
	return s
}
