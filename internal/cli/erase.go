package cli

import (
	"context"
	"flag"
	"io"
	"strings"

	"github.com/hookyard/hookyard/pkg/ops/api"
)

// listFlag is a flag that may be given more than once, each value a list
// separated by commas.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*l = append(*l, v)
		}
	}
	return nil
}

// eraseCmd runs `erase -account A [-resource R]... [-provider P]
// [-environment E]`: the personal data of one source account, or of some
// of its resources, removed from every table, and the erasure recorded in
// ops_audit with it (api.Erase), and a change record of each erased
// projection queued for the changes topic. It prints the rows changed per
// table and the change records queued.
func eraseCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("erase", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var r api.EraseRequest
	var resources listFlag
	fs.StringVar(&r.Provider, "provider", "", "only this provider")
	fs.StringVar(&r.Account, "account", "", "the source account (required)")
	fs.StringVar(&r.Environment, "environment", "", "only this environment")
	fs.Var(&resources, "resource", "only this resource id (repeat, or separate with commas)")
	const use = "erase -account A [-resource R] [-provider P] [-environment E]"
	pos, err := parseInterleaved(fs, args)
	if err != nil || len(pos) > 0 || strings.TrimSpace(r.Account) == "" {
		return usageErr("%s%s", use, errSuffix(err))
	}
	r.Resources = resources
	out, err := api.Erase(ctx, e.pool, cliActor(), r, e.cfg.Kafka.ChangesTopic)
	if err != nil {
		return err
	}
	return printJSON(stdout, out)
}
