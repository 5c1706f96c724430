package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/hookyard/hookyard/internal/chaos"
	"github.com/hookyard/hookyard/pkg/config"
)

// chaosCmd runs the services of this very binary as processes under faults
// and prints the invariants table. The database server is DATABASE_URL's
// (the run creates and drops a database of its own there); KAFKA_BROKERS,
// when set, is used instead of an in-process kfake cluster.
func chaosCmd(ctx context.Context, cfg *config.Config, log *slog.Logger, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	seed := fs.Int64("seed", 1, "decides lifecycles, deliveries and faults")
	subs := fs.Int("subscriptions", chaos.SubscriptionsDefault, "subscriptions, half Stripe, half Chargebee")
	events := fs.Int("events", chaos.EventsDefault, "about how many provider events")
	rate := fs.Int("rate", chaos.EventsPerSecondDefault, "events per second (the traffic lasts at least 40 s)")
	processors := fs.Int("processors", chaos.ProcessorsDefault, "processors in the group")
	noFaults := fs.Bool("no-faults", false, "traffic without faults")
	keep := fs.Bool("keep", false, "keep the run's database, config and logs (printed)")
	extra := fs.String("extra-services", "", "more subcommands to run, comma-separated (e.g. the effects sender)")
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("chaos: find this binary: %w", err)
	}
	var extras []string
	for _, s := range strings.Split(*extra, ",") {
		if s = strings.TrimSpace(s); s != "" {
			extras = append(extras, s)
		}
	}
	_, err = chaos.Run(ctx, chaos.Config{Seed: *seed, Subscriptions: *subs, Events: *events, EventsPerSecond: *rate,
		Processors: *processors, NoFaults: *noFaults, KeepLogs: *keep, KeepDatabase: *keep, ExtraServices: extras,
		Binary: bin, DatabaseURL: cfg.DatabaseURL, KafkaBrokers: cfg.KafkaBrokers, Log: log}, stdout)
	return err
}
