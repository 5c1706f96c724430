package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/api"
	partreplay "github.com/hookyard/hookyard/pkg/ops/replay"
	"github.com/hookyard/hookyard/pkg/projection"
)

// timeValue is a flag holding a time given as a duration back from now
// (24h) or an RFC 3339 time.
type timeValue struct{ t time.Time }

func (v *timeValue) String() string {
	if v == nil || v.t.IsZero() {
		return ""
	}
	return v.t.Format(time.RFC3339)
}

func (v *timeValue) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return fmt.Errorf("duration %s must be positive", s)
		}
		v.t = time.Now().Add(-d)
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return fmt.Errorf("%q is neither a duration (24h) nor an RFC 3339 time", s)
	}
	v.t = t
	return nil
}

// deadFlags declares the filters dead list and dead replay share.
func deadFlags(fs *flag.FlagSet, f *inbox.DeadFilter, since *timeValue) {
	fs.StringVar(&f.Provider, "provider", "", "only this provider")
	fs.StringVar(&f.SourceAccount, "account", "", "only this source account")
	fs.StringVar(&f.Environment, "environment", "", "only this environment")
	fs.StringVar(&f.EventType, "type", "", "only this event type (customer.subscription.updated)")
	fs.StringVar(&f.ResourceType, "resource-type", "", "only this resource type")
	fs.StringVar(&f.ResourceID, "resource", "", "only this resource id")
	fs.Var(since, "since", "only events received since (24h or an RFC 3339 time)")
}

func deadCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErr("dead needs list, show or replay")
	}
	fs := flag.NewFlagSet("dead "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f inbox.DeadFilter
	var since timeValue
	switch args[0] {
	case "list":
		deadFlags(fs, &f, &since)
		fs.IntVar(&f.Limit, "limit", inbox.DeadListLimitDefault, "most events to list")
		pos, err := parseInterleaved(fs, args[1:])
		if err != nil || len(pos) > 0 || f.Limit <= 0 {
			return usageErr("dead list [-provider P] [-account A] [-environment E] [-type T] [-since 24h] [-limit N]%s", errSuffix(err))
		}
		f.Since = since.t
		rows, err := inbox.ListDead(ctx, e.pool, f)
		if err != nil {
			return err
		}
		if rows == nil {
			rows = []inbox.Row{}
		}
		return printJSON(stdout, map[string]any{"events": rows, "count": len(rows)})
	case "show":
		payload := fs.Bool("payload", false, "include the payload")
		pos, err := parseInterleaved(fs, args[1:])
		if err != nil || len(pos) != 4 {
			return usageErr("dead show PROVIDER ACCOUNT ENV EVENT_ID [-payload]%s", errSuffix(err))
		}
		ev, err := api.ShowEvent(ctx, e.pool, inbox.Key{Provider: pos[0], SourceAccount: pos[1], Environment: pos[2], EventID: pos[3]}, *payload)
		if err != nil {
			return err
		}
		return printJSON(stdout, ev)
	case "replay":
		deadFlags(fs, &f, &since)
		fs.IntVar(&f.Limit, "limit", inbox.DeadReplayLimitDefault, "most events to replay")
		pos, err := parseInterleaved(fs, args[1:])
		if err != nil || (len(pos) != 0 && len(pos) != 4) || f.Limit <= 0 {
			return usageErr("dead replay PROVIDER ACCOUNT ENV EVENT_ID, or dead replay [filters of dead list] [-limit N]%s", errSuffix(err))
		}
		if len(pos) == 4 {
			var set []string
			fs.Visit(func(fl *flag.Flag) { set = append(set, "-"+fl.Name) })
			if len(set) > 0 {
				return usageErr("dead replay of one event takes no filters (%s)", strings.Join(set, " "))
			}
			k := inbox.Key{Provider: pos[0], SourceAccount: pos[1], Environment: pos[2], EventID: pos[3]}
			err := inbox.ReplayDeadEvent(ctx, e.pool, k)
			if errors.Is(err, inbox.ErrNotDead) {
				return fmt.Errorf("%w; `hookyard replay event %s` replays it anyway", err, strings.Join(pos, " "))
			}
			if err != nil {
				return err
			}
			return printJSON(stdout, map[string]any{"replayed": 1})
		}
		f.Since = since.t
		n, err := inbox.ReplayDeadMatching(ctx, e.pool, f)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"replayed": n})
	}
	return usageErr("dead %s: unknown, want list, show or replay", args[0])
}

// parkedCmd runs `parked list`: projections waiting for reconciliation,
// including those a check could not resolve.
func parkedCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "list" {
		return usageErr("parked needs list")
	}
	fs := flag.NewFlagSet("parked list", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f projection.ParkedFilter
	fs.StringVar(&f.Provider, "provider", "", "only this provider")
	fs.StringVar(&f.SourceAccount, "account", "", "only this source account")
	fs.StringVar(&f.Environment, "environment", "", "only this environment")
	fs.IntVar(&f.Limit, "limit", projection.ParkedListLimitDefault, "most projections to list")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil || len(pos) > 0 || f.Limit <= 0 {
		return usageErr("parked list [-provider P] [-account A] [-environment E] [-limit N]%s", errSuffix(err))
	}
	parked, err := projection.ListParked(ctx, e.pool, f)
	if err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"parked": parked, "count": len(parked)})
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (" + err.Error() + ")"
}

// replayPartition runs `replay partition`: the records of one partition sent
// back down the outbox path while the processors keep running.
func replayPartition(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("replay partition", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	part := fs.Int("partition", -1, "partition to replay")
	from := fs.Int64("from-offset", 0, "first offset to read")
	var since timeValue
	fs.Var(&since, "since", "start at the first record published since (2h or an RFC 3339 time)")
	to := fs.Int64("to-offset", 0, "stop before this offset (default: the high watermark at the start)")
	limit := fs.Int("limit", 0, "most records to read (0: no limit)")
	const use = "replay partition -partition N (-from-offset O | -since 2h|RFC3339) [-to-offset O] [-limit N]"
	if err := fs.Parse(args); err != nil {
		return usageErr("%s (%v)", use, err)
	}
	if fs.NArg() > 0 {
		return usageErr("%s: unexpected %q", use, strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if !set["partition"] {
		return usageErr("%s: -partition is required", use)
	}
	if *part < 0 || *part > math.MaxInt32 {
		return usageErr("%s: -partition %d is out of range", use, *part)
	}
	req := partreplay.Request{Partition: int32(*part), Since: since.t, Limit: *limit}
	if set["from-offset"] {
		req.FromOffset = from
	}
	if set["to-offset"] {
		req.ToOffset = to
	}
	r, err := partreplay.New(e.pool, e.log, partreplay.Config{Brokers: brokers(e.cfg), Topic: e.cfg.Kafka.Topic})
	if err != nil {
		return err
	}
	rep, err := r.Replay(ctx, req)
	if errors.Is(err, partreplay.ErrInvalid) {
		return usageErr("%v", err)
	}
	if perr := printJSON(stdout, rep); err == nil {
		err = perr
	}
	if err == nil && (rep.Stopped != "" || rep.Skipped[inbox.SkipBusy] > 0) {
		// Part of the range was not replayed: say so in the exit code, so a
		// script does not take it for success. The report says where to resume.
		err = fmt.Errorf("partition replay incomplete (stopped: %q, busy: %d); resume with -from-offset %d",
			rep.Stopped, rep.Skipped[inbox.SkipBusy], rep.NextOffset)
	}
	return err
}
