package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/hookyard/hookyard/internal/demo"
	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/provider"
)

// demoCmd plays the out-of-order cancellation against the pipeline `make
// run` started, reading its addresses, token and Stripe endpoint from the
// same config and environment.
func demoCmd(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	sim := fs.String("sim", "http://"+envOr("SIM_ADDR", SimAddrDefault), "Stripe simulator base URL")
	rcv := fs.String("receiver", "http://"+cfg.HTTPAddr, "receiver base URL")
	ops := fs.String("ops", "http://"+cfg.OpsAddr, "query/ops API base URL")
	endpoint := fs.String("endpoint", "stripe-dev", "Stripe endpoint the simulator delivers to")
	if err := fs.Parse(args); err != nil {
		return usageErr("%v", err)
	}
	var ep *provider.Endpoint
	for i := range cfg.Endpoints {
		if cfg.Endpoints[i].ID == *endpoint && cfg.Endpoints[i].Provider == provider.Stripe {
			ep = &cfg.Endpoints[i]
		}
	}
	if ep == nil {
		return fmt.Errorf("demo: no Stripe endpoint %q in the config", *endpoint)
	}
	_, err := demo.Run(ctx, demo.Config{SimURL: *sim, ReceiverURL: *rcv, OpsURL: *ops,
		OpsToken: cmp.Or(cfg.OpsToken, config.OpsTokenDevDefault), Endpoint: *ep, Policy: cfg.Access}, stdout)
	return err
}
