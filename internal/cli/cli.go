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

	"github.com/hookyard/hookyard/internal/demo"
	"github.com/hookyard/hookyard/pkg/config"
)

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
	// stream is about the changes topic: no tracing, and no pool unless
	// the command opens one itself.
	stream
)

// Main runs the binary and returns its exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	// First, so that every reader of the environment after it, ours and
	// the OpenTelemetry SDK's, sees NAME_FILE's value for NAME.
	if err := config.ResolveFileVars(os.Environ(), os.LookupEnv, os.Setenv); err != nil {
		fmt.Fprintf(stderr, "hookyard: %v\n", err)
		return 1
	}
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
	cfg, err := config.LoadService(*cfgPath, cmd)
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
	if cmd.kind == client || cmd.kind == stream {
		return cmd.run(ctx, e, args, stdout)
	}
	if cmd.kind == service {
		if cmd.devDefaults {
			// The one place the dev token is allowed: a laptop, loopback only.
			cfg.ApplyDevDefaults()
		} else if err := cfg.CheckService(name); err != nil {
			// A service that can be reached or that acts on real data never
			// runs on the example config's dev secrets or without an ops token.
			return fmt.Errorf("refusing to start %s: %w", name, err)
		}
		collectLess(log, name, cfg)
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

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
