package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"

	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// cliActor is who the CLI's audit records name: the operator's own tool
// has no token, so the OS user it runs as (its uid when the user has no
// name, as in a container with an arbitrary uid).
func cliActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "cli:" + u.Username
	}
	return "cli:uid-" + strconv.Itoa(os.Getuid())
}

// record writes the audit record of a CLI payload read or change: the
// command and its arguments (identities and filters, never a payload) and
// the rows. A change is recorded after it is done, so a failure says the
// change stands.
func (e *env) record(ctx context.Context, action, command string, args []string, rows int64) error {
	target := map[string]any{"command": command, "args": args}
	if err := audit.Record(ctx, e.pool, cliActor(), action, target, rows); err != nil {
		return fmt.Errorf("%s was done (%d rows) but not recorded: %w", command, rows, err)
	}
	return nil
}

// auditCmd runs `audit [-since 24h|RFC3339] [-limit N]`: the records,
// newest first.
func auditCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var since timeValue
	fs.Var(&since, "since", "only records since (24h or an RFC 3339 time)")
	limit := fs.Int("limit", audit.ListLimitDefault, "most records to list")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *limit <= 0 {
		return usageErr("audit [-since 24h|RFC3339] [-limit N]%s", errSuffix(err))
	}
	entries, err := audit.List(ctx, e.pool, since.t, *limit)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"audit": entries, "count": len(entries)})
}
