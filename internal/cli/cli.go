package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/hookyard/hookyard/internal/demo"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/topic"
)

// kind is what a command needs from the binary before its run func starts.
type kind int

const (
	// service is a long-running service. Outside dev it refuses the
	// example config's dev secrets and a missing or dev ops token; it
	// exports traces when the OTEL variables ask for it, and gets a
	// migrated pool.
	service kind = iota
	// client brings its own connections: demo talks to a running pipeline
	// over HTTP, chaos creates a database of its own. It gets no pool.
	client
	// ops is an operation on the database: a migrated pool, no tracing.
	ops
)

// heading is the usage section of each kind, in the order printed.
var heading = []struct {
	kind  kind
	title string
}{
	{service, "Services (scale each separately):"},
	{client, "Proof:"},
	{ops, "Operations:"},
}

// command is one subcommand of the binary. Dispatch, the checks before it
// runs (dev defaults, tracing), its pool size and its lines of the usage
// text all come from its row of the table below; only the rule that dev
// alone may start a database of its own (devdb.go) names a command
// elsewhere.
type command struct {
	name string
	// usage is the command's lines in the usage text, verbatim: synopsis,
	// then the summary at column 18 (services, proof) or 43 (operations).
	usage string
	kind  kind
	// devDefaults marks the one command allowed to run on the dev token and
	// the example config's dev secrets: dev, on a laptop, loopback only.
	devDefaults bool
	// conns is the pool's size; nil means defaultConns.
	conns func(*config.Config) int32
	// run runs the command. e.pool is nil for a client.
	run func(ctx context.Context, e *env, args []string, stdout io.Writer) error
}

// defaultConns is the pool size of a command that names none.
const defaultConns = 4

var commands = []command{
	{name: "receiver", kind: service, run: runReceiver, conns: fixedConns(24),
		usage: "  receiver        POST /webhooks/{endpoint_id} on HTTP_ADDR (default 127.0.0.1:8080)\n"},
	{name: "outbox-relay", kind: service, run: runRelay,
		// Claims in flight, the listener, a scrape.
		conns: func(cfg *config.Config) int32 {
			return int32(cmp.Or(cfg.Relay.InFlight, outboxrelay.InFlightDefault) + 2)
		},
		usage: "  outbox-relay    publish outbox rows to Kafka\n"},
	{name: "processor", kind: service, run: runProcessor,
		// The effects sender's claims and outcome writes on top.
		conns: fixedConns(defaultConns + 2),
		usage: "  processor       consume the events topic and keep projections; also sends external effects\n"},
	{name: "effects", kind: service, run: runEffects,
		usage: "  effects         send external effects only (receipts to RECEIPT_WEBHOOK_URL), for scaling them apart\n"},
	{name: "reconciler", kind: service, run: runReconciler,
		usage: "  reconciler      enqueue checks for what no webhook told us\n"},
	{name: "api", kind: service, run: runAPI,
		usage: "  api             query/ops API on OPS_ADDR (default 127.0.0.1:8081)\n"},
	{name: "dev", kind: service, devDefaults: true, run: runDevCmd, conns: fixedConns(24),
		usage: `  dev             all of the above in one process, embedded Kafka and Stripe simulator; with
                  DATABASE_URL unset and nothing on 127.0.0.1:5432, an embedded PostgreSQL too
                  (data in /var/lib/hookyard/dev-postgres as root, else ~/.local/state/hookyard)
`},

	{name: "demo", kind: client, run: runDemo,
		usage: `  demo [-sim URL] [-receiver URL] [-ops URL]
                  against a running ` + "`make run`" + `: cancel a subscription, deliver the cancellation
                  first and an older "active" event after it (twice); print a naive consumer's
                  decision beside hookyard's, and the explain timeline
`},
	{name: "chaos", kind: client, run: runChaos,
		usage: `  chaos [-seed N] [-subscriptions N] [-events N] [-rate N] [-keep]
                  run every service as its own process of this binary, with disordered,
                  duplicated and dropped deliveries and faults from the seed; print the
                  invariants table (exit 1 on a violation, with its explain timeline)
`},

	{name: "migrate", kind: ops, run: runMigrate,
		usage: "  migrate                                  create the database if missing and apply migrations\n"},
	{name: "events", kind: ops, run: eventsCmd,
		usage: "  events [-status dead] [-limit N]         list events by status (dead, retrying, pending, ...)\n"},
	{name: "explain", kind: ops, run: explainCmd,
		usage: `  explain PROVIDER ACCOUNT ENV TYPE ID [-json] [-limit N]
                                           why a resource is in its state: projection, access, and its
                                           timeline of events, decisions, fetches and reconcile checks
`},
	{name: "replay", kind: ops, run: replay,
		usage: `  replay event PROVIDER ACCOUNT ENV EVENT_ID
  replay dead [-since 24h] [-limit N]      replay dead events through the outbox
  replay resource PROVIDER ACCOUNT ENV TYPE ID [-since 24h]
  replay partition -partition N (-from-offset O | -since 2h|RFC3339) [-to-offset O] [-limit N]
                                           re-enqueue one partition's records up to its high watermark
                                           (-to-offset exclusive); the processors keep running
`},
	{name: "dead", kind: ops, run: deadCmd,
		usage: `  dead list [-provider P] [-account A] [-environment E] [-type T] [-resource-type T] [-resource ID]
            [-since 24h|RFC3339] [-limit N]
                                           dead events with attempts, next attempt, last error, resource
  dead show PROVIDER ACCOUNT ENV EVENT_ID [-payload]
                                           one event and its history entries
  dead replay PROVIDER ACCOUNT ENV EVENT_ID    replay one dead event (refused if it is not dead)
  dead replay [filters of dead list] [-limit N]
`},
	{name: "parked", kind: ops, run: parkedCmd,
		usage: `  parked list [-provider P] [-account A] [-environment E] [-limit N]
                                           projections parked for reconciliation (version gap, conflict,
                                           unordered) with why, since when and the last check sent
`},
	{name: "reconcile", kind: ops, run: runReconcile,
		usage: `  reconcile [-provider P] [-account A] [-environment E]
                                           run one reconcile round now over the selected sources and print
                                           per source the listings walked, checks, divergences, events
                                           ingested, redeliveries asked, errors, and the checkpoints
`},
	{name: "purge", kind: ops, run: purgeCmd,
		usage: `  purge [-older-than 720h]                 drop payloads of finished events, keep their identities
                                           (default: retention.payload_age; the reconciler also purges)
`},
	{name: "actions", kind: ops, run: actionsCmd,
		usage: `  actions list [-status dead] [-provider P] [-account A] [-environment E] [-kind receipt]
               [-since 24h|RFC3339] [-limit N]
                                           external effects (dead by default) with attempts, next attempt, last error
  actions show PROVIDER ACCOUNT ENV SUBJECT KIND
                                           one action, whatever its status, with its fact and idempotency key
  actions replay PROVIDER ACCOUNT ENV SUBJECT KIND   send a dead action again, same key (refused if not dead)
  actions replay [filters of actions list] [-limit N]
`},
	{name: "fence", kind: ops, run: fenceCmd,
		usage: `  fence status                             partition generations and the fenced partition count
  fence resize -partitions N [-force]      grow the topic and re-fence (processors stopped, lag 0)
`},
}

func fixedConns(n int32) func(*config.Config) int32 {
	return func(*config.Config) int32 { return n }
}

// lookup returns the command named name.
func lookup(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

const usageHead = `hookyard — webhooks into correct state, whatever order they arrive in.

Usage: hookyard [-config FILE] <command> [args]
`

const usageEnv = `Environment: DATABASE_URL, HTTP_ADDR, OPS_ADDR, OPS_TOKEN (or OPS_TOKEN_FILE; any VAR as VAR_FILE),
METRICS_ADDR, KAFKA_BROKERS, STRIPE_API_BASE, GITHUB_API_BASE, STRIPE_API_KEY (API key of Stripe endpoints
without their own api_key), RECEIPT_WEBHOOK_URL (where receipts are POSTed), HOOKYARD_CONFIG (default
hookyard.example.yaml), LOG_LEVEL, SIM_ADDR (dev only).
`

// usage is the help text: each kind's commands under its heading, in the
// table's order.
var usage = func() string {
	var b strings.Builder
	b.WriteString(usageHead)
	for _, h := range heading {
		b.WriteString("\n" + h.title + "\n")
		for _, c := range commands {
			if c.kind == h.kind {
				b.WriteString(c.usage)
			}
		}
	}
	b.WriteString("\n" + usageEnv)
	return b.String()
}()

// Main runs the binary and returns its exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: logLevel()}))
	fs := flag.NewFlagSet("hookyard", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", envOr("HOOKYARD_CONFIG", "hookyard.example.yaml"), "config file")
	fs.Usage = func() { fmt.Fprint(stderr, usage) }
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	if cmd == "help" || cmd == "-h" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		log.Error("load config", slog.String("error", err.Error()))
		return 1
	}
	if err := run(ctx, cmd, rest, cfg, log, stdout); err != nil {
		if errors.Is(err, demo.ErrNotRunning) {
			fmt.Fprintf(stderr, "hookyard %s: %v\n", cmd, err)
			return 1
		}
		if errors.Is(err, errUsage) {
			fmt.Fprintf(stderr, "hookyard %s: %v\n\n%s", cmd, err, usage)
			return 2
		}
		log.Error(cmd+" failed", slog.String("error", err.Error()))
		return 1
	}
	return 0
}

var errUsage = errors.New("usage")

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(envOr("LOG_LEVEL", "info"))); err != nil {
		return slog.LevelInfo
	}
	return l
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, name string, args []string, cfg *config.Config, log *slog.Logger, stdout io.Writer) (retErr error) {
	cmd, ok := lookup(name)
	if !ok {
		return usageErr("unknown command %q", name)
	}
	e := &env{cfg: cfg, log: log, reg: newRegistry()}
	if cmd.kind == client {
		return cmd.run(ctx, e, args, stdout)
	}
	if cmd.kind == service {
		if cmd.devDefaults {
			// The one place the dev token is allowed: a laptop, loopback only.
			cfg.OpsToken = cmp.Or(cfg.OpsToken, config.OpsTokenDevDefault)
		} else if err := cfg.CheckProduction(); err != nil {
			// A service that can be reached or that acts on real data never
			// runs on the example config's dev secrets or without an ops token.
			return fmt.Errorf("refusing to start %s: %w", name, err)
		}
		stopTracing, err := startTracing(ctx, name, log)
		if err != nil {
			return err
		}
		defer stopTracing()
	}
	conns := int32(defaultConns)
	if cmd.conns != nil {
		conns = cmd.conns(cfg)
	}
	ctx, stopDB, err := devDatabase(ctx, name, cfg, log)
	if err != nil {
		return err
	}
	defer func() { retErr = cmp.Or(retErr, stopDB()) }()
	pool, err := openDB(ctx, cfg, log, conns)
	if err != nil {
		return err
	}
	defer pool.Close()
	e.pool = pool
	return cmd.run(ctx, e, args, stdout)
}

func stripeBase(cfg *config.Config) string { return cfg.StripeBase(config.StripeAPIBaseDefault) }

func runDemo(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	return demoCmd(ctx, e.cfg, args, stdout)
}

func runChaos(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	return chaosCmd(ctx, e.cfg, e.log, args, stdout)
}

func runMigrate(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	e.log.InfoContext(ctx, "database ready")
	return nil
}

func runDevCmd(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	return runDev(ctx, e, envOr("SIM_ADDR", SimAddrDefault))
}

func runReceiver(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	// The receiver's live heap is small and its garbage per request
	// large; trading a few MiB for less collection is worth it unless
	// the operator chose GOGC.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	r, err := e.receiver()
	if err != nil {
		return err
	}
	return withMetrics(ctx, e, r.Run)
}

func runAPI(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	ops, jobs := e.opsAPI()
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return jobs.Run(ctx) })
	g.Go(func() error { return health.Serve(ctx, ops, e.cfg.OpsAddr, e.log) })
	return g.Wait()
}

func runRelay(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	if err := ensureTopic(ctx, e.cfg, brokers(e.cfg)); err != nil {
		return err
	}
	r, err := e.relay(brokers(e.cfg))
	if err != nil {
		return err
	}
	return withMetrics(ctx, e, r.Run)
}

func runProcessor(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	p, err := e.processor(brokers(e.cfg), stripeBase(e.cfg))
	if err != nil {
		return err
	}
	// The processor records actions; its binary sends them too, so a
	// deployment of processors needs no other service for receipts.
	snd, err := e.effects()
	if err != nil {
		return err
	}
	// Readiness turns false when the processor stopped for good (the
	// topic's partition count changed).
	return withMetrics(ctx, e, func(ctx context.Context) error {
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return p.Run(ctx) })
		g.Go(func() error { return snd.Run(ctx) })
		return g.Wait()
	}, p.Check)
}

func runEffects(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	snd, err := e.effects()
	if err != nil {
		return err
	}
	return withMetrics(ctx, e, snd.Run)
}

func runReconciler(ctx context.Context, e *env, _ []string, _ io.Writer) error {
	kc, err := kgo.NewClient(kgo.SeedBrokers(brokers(e.cfg)...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer kc.Close()
	rec, err := e.reconciler(stripeBase(e.cfg), 0, kc)
	if err != nil {
		return err
	}
	return withMetrics(ctx, e, rec.Run)
}

func runReconcile(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	return reconcileCmd(ctx, e, args, stdout, stripeBase(e.cfg))
}

func eventsCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	status := fs.String("status", inbox.StatusDead, "status to list")
	limit := fs.Int("limit", 100, "rows")
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	rows, err := inbox.List(ctx, e.pool, *status, *limit)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"events": rows})
}

func purgeCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("purge", flag.ContinueOnError)
	older := fs.Duration("older-than", e.cfg.Retention.PayloadAge, "purge payloads of finished events older than this (default: retention.payload_age)")
	if err := fs.Parse(args); err != nil || *older <= 0 {
		return usageErr("purge needs -older-than DURATION (or retention.payload_age in the config)")
	}
	// Chunk by chunk, with the count so far on a terminal: a purge of a
	// large inbox runs for minutes, and an operator wants to see it move.
	cutoff, progress := time.Now().Add(-*older), terminalProgress()
	var n int64
	for {
		c, err := inbox.PurgeChunk(ctx, e.pool, cutoff, job.PurgeChunk)
		n += c
		if err != nil {
			return err
		}
		progress("purged %d payloads", n)
		if c < job.PurgeChunk {
			break
		}
	}
	progress("")
	return printJSON(stdout, map[string]any{"purged": n})
}

func withMetrics(ctx context.Context, e *env, run func(context.Context) error, checks ...health.Check) error {
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return e.serveMetrics(ctx, checks...) })
	g.Go(func() error { return run(ctx) })
	return g.Wait()
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func sinceFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("since", 0, "only events received within this duration (0: all)")
}

func sinceTime(d time.Duration) time.Time {
	if d <= 0 {
		return time.Time{}
	}
	return time.Now().Add(-d)
}

func replay(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErr("replay needs event, dead, resource or partition")
	}
	if args[0] == "partition" {
		return replayPartition(ctx, e, args[1:], stdout)
	}
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	since := sinceFlag(fs)
	limit := fs.Int("limit", 1000, "most events to replay")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return usageErr("%v", err)
	}
	var n int64
	switch {
	case args[0] == "event" && len(pos) == 4:
		n, err = inbox.Replay(ctx, e.pool, inbox.Key{Provider: pos[0], SourceAccount: pos[1], Environment: pos[2], EventID: pos[3]})
	case args[0] == "dead" && len(pos) == 0:
		n, err = inbox.ReplayDead(ctx, e.pool, sinceTime(*since), *limit)
	case args[0] == "resource" && len(pos) == 5:
		n, err = inbox.ReplayResource(ctx, e.pool, pos[0], pos[1], pos[2], pos[3], pos[4], sinceTime(*since))
	default:
		return usageErr("replay %s: wrong arguments", strings.Join(args, " "))
	}
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"replayed": n})
}

// parseInterleaved accepts flags before or after positional arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func fenceCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErr("fence needs status or resize")
	}
	switch args[0] {
	case "status":
		parts, err := fence.Partitions(ctx, e.pool, e.cfg.Kafka.Topic)
		if err != nil {
			return err
		}
		// A count not recorded yet, or unreadable, prints as null.
		var count *int
		if n, ok, err := fence.RecordedCount(ctx, e.pool, e.cfg.Kafka.Topic); err == nil && ok {
			count = &n
		}
		return printJSON(stdout, map[string]any{"topic": e.cfg.Kafka.Topic, "partition_count": count, "partitions": parts})
	case "resize":
		fs := flag.NewFlagSet("fence resize", flag.ContinueOnError)
		n := fs.Int("partitions", 0, "new partition count")
		force := fs.Bool("force", false, "resize even if the group has members or lag")
		if err := fs.Parse(args[1:]); err != nil || *n <= 0 {
			return usageErr("fence resize needs -partitions N")
		}
		return resize(ctx, e, *n, *force, stdout)
	}
	return usageErr("fence %s: unknown", args[0])
}

// resize checks the topic is drained (no group members, no lag), grows it,
// then records the new count and bumps every generation. Rows still in the
// outbox are fine: they are published after the resize, on the new mapping.
func resize(ctx context.Context, e *env, n int, force bool, stdout io.Writer) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(e.cfg)...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if !force {
		lags, err := adm.Lag(ctx, e.cfg.Kafka.Group)
		if err != nil {
			return fmt.Errorf("read consumer lag: %w", err)
		}
		if l, ok := lags[e.cfg.Kafka.Group]; ok {
			if l.FetchErr != nil {
				return fmt.Errorf("read consumer lag: %w", l.FetchErr)
			}
			if len(l.Members) > 0 {
				return fmt.Errorf("consumer group %s still has %d members: stop the processors first", e.cfg.Kafka.Group, len(l.Members))
			}
			if tl := l.Lag.TotalByTopic()[e.cfg.Kafka.Topic]; tl.Lag > 0 {
				return fmt.Errorf("consumer group %s has lag %d on %s: let it drain (or -force)", e.cfg.Kafka.Group, tl.Lag, e.cfg.Kafka.Topic)
			}
		}
	}
	cur, err := topic.Partitions(ctx, cl, e.cfg.Kafka.Topic)
	if err != nil {
		return err
	}
	// A broker may not know of a resize yet; the recorded count does.
	recorded, _, err := fence.RecordedCount(ctx, e.pool, e.cfg.Kafka.Topic)
	if err != nil {
		return err
	}
	cur = max(cur, recorded)
	if n < cur {
		return fmt.Errorf("topic %s has %d partitions; Kafka cannot shrink it to %d", e.cfg.Kafka.Topic, cur, n)
	}
	if n > cur {
		if err := addPartitions(ctx, adm, e.cfg.Kafka.Topic, n); err != nil {
			return err
		}
	}
	if err := fence.Resize(ctx, e.pool, e.cfg.Kafka.Topic, n); err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"topic": e.cfg.Kafka.Topic, "partition_count": n, "previous": cur})
}

// terminalProgress returns a printer of one progress line, rewritten in
// place on standard error when that is a terminal, and silent otherwise
// (scripts read the JSON on standard output). An empty format ends the line.
func terminalProgress() func(format string, a ...any) {
	fi, err := os.Stderr.Stat()
	if err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return func(string, ...any) {}
	}
	return func(format string, a ...any) {
		if format == "" {
			fmt.Fprintln(os.Stderr)
			return
		}
		fmt.Fprintf(os.Stderr, "\r"+format+"\033[K", a...)
	}
}

// addPartitions grows topic to n partitions. The topic's own answer counts:
// a refusal (a broker's metadata lagged behind an earlier resize, so n is
// not more than the topic has) must never let the count be recorded.
// Retriable answers (a controller moving, a timeout) are tried again a few
// times.
func addPartitions(ctx context.Context, adm *kadm.Client, topicName string, n int) error {
	for attempt := 1; ; attempt++ {
		resp, err := adm.UpdatePartitions(ctx, n, topicName)
		if err == nil {
			for _, r := range resp {
				err = errors.Join(err, r.Err)
			}
		}
		if err == nil {
			return nil
		}
		if attempt == 3 || !kerr.IsRetriable(err) {
			return fmt.Errorf("add partitions to %s: %w", topicName, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}
