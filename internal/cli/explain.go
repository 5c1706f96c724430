package cli

import (
	"context"
	"flag"
	"io"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/explain"
)

// explainCmd prints a resource's timeline: plain text for a person, or the
// structured form with -json (what GET /v1/explain/... answers).
func explainCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the timeline as JSON")
	limit := fs.Int("limit", explain.LimitDefault, "most timeline entries shown, the latest ones")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return usageErr("%v", err)
	}
	if len(pos) != 5 || *limit <= 0 {
		return usageErr("explain needs PROVIDER ACCOUNT ENV TYPE ID [-json] [-limit N]")
	}
	r := message.Resource{Provider: pos[0], SourceAccount: pos[1], Environment: pos[2], Type: pos[3], ID: pos[4]}
	t, err := explain.Build(ctx, e.pool, r, explain.Options{Limit: *limit, Policy: e.cfg.Access,
		ActionsWaiting: actionsWaiting(e.cfg)})
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, t)
	}
	return t.WriteText(stdout)
}
