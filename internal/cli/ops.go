package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/ops/job"
	partreplay "github.com/hookyard/hookyard/pkg/ops/replay"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/retention"
	"github.com/hookyard/hookyard/pkg/topic"
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
		if *payload {
			// Printed only once its read is recorded.
			if err := e.record(ctx, audit.ActionPayloadRead, "dead show", args[1:], api.PayloadRows(ev.Event)); err != nil {
				return err
			}
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
			return e.printChange(ctx, stdout, audit.ActionReplayDead, "dead replay", args[1:], 1)
		}
		f.Since = since.t
		n, err := inbox.ReplayDeadMatching(ctx, e.pool, f)
		if err != nil {
			return err
		}
		return e.printChange(ctx, stdout, audit.ActionReplayDead, "dead replay", args[1:], n)
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
	if rerr := e.record(ctx, audit.ActionReplayPartition, "replay partition", args, int64(rep.ReplayedEvents)); err == nil {
		err = rerr
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
	dryRun := fs.Bool("dry-run", false, "print what the purge would touch (rows, oldest and newest received_at) and change nothing")
	if err := fs.Parse(args); err != nil || *older <= 0 {
		return usageErr("purge needs -older-than DURATION (or retention.payload_age in the config)")
	}
	if floor := e.cfg.Retention.MinPurgeAge; *older < floor {
		return usageErr("purge -older-than %s is below retention.min_purge_age %s: events that young may still be needed for recovery", *older, floor)
	}
	cutoff := time.Now().Add(-*older)
	if *dryRun {
		p, err := inbox.PreviewPurge(ctx, e.pool, cutoff)
		if err != nil {
			return err
		}
		return printJSON(stdout, api.DryRun{DryRun: true, Cutoff: cutoff, PurgePreview: p})
	}
	// Chunk by chunk, with the count so far on a terminal: a purge of a
	// large inbox runs for minutes, and an operator wants to see it move.
	progress := terminalProgress()
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
	// The audit's own retention goes with every purge, as in purge jobs.
	auditPurged, err := audit.Purge(ctx, e.pool, time.Now().Add(-e.cfg.Retention.AuditAge))
	if err != nil {
		return err
	}
	if err := e.record(ctx, audit.ActionPurge, "purge", args, n); err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"purged": n, "audit_purged": auditPurged})
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
	var action string
	switch {
	case args[0] == "event" && len(pos) == 4:
		action = audit.ActionReplayEvent
		n, err = inbox.Replay(ctx, e.pool, inbox.Key{Provider: pos[0], SourceAccount: pos[1], Environment: pos[2], EventID: pos[3]})
	case args[0] == "dead" && len(pos) == 0:
		action = audit.ActionReplayDead
		n, err = inbox.ReplayDead(ctx, e.pool, sinceTime(*since), *limit)
	case args[0] == "resource" && len(pos) == 5:
		action = audit.ActionReplayResource
		n, err = inbox.ReplayResource(ctx, e.pool, pos[0], pos[1], pos[2], pos[3], pos[4], sinceTime(*since))
	default:
		return usageErr("replay %s: wrong arguments", strings.Join(args, " "))
	}
	if reason := inbox.SkipOf(err); reason != "" {
		// Say why nothing was replayed, as a partition replay's report does,
		// and fail: a script must not take it for success.
		if perr := printJSON(stdout, map[string]any{"replayed": 0, "skipped": reason}); perr != nil {
			return perr
		}
		return err
	}
	if err != nil {
		return err
	}
	return e.printChange(ctx, stdout, action, "replay "+args[0], args[1:], n)
}

// printChange records a change the command made, then prints how many
// rows it replayed.
func (e *env) printChange(ctx context.Context, stdout io.Writer, action, command string, args []string, n int64) error {
	if err := e.record(ctx, action, command, args, n); err != nil {
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
	if err := e.record(ctx, audit.ActionFenceResize, "fence resize", []string{"-partitions", fmt.Sprint(n), "-topic", e.cfg.Kafka.Topic}, int64(n)); err != nil {
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

// retentionCmd runs one retention pass and prints what it created, dropped
// and forgot.
func retentionCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	if len(args) > 0 {
		return usageErr("retention takes no arguments")
	}
	rep, err := retention.Run(ctx, e.pool, e.log, *retentionPolicy(e.cfg), time.Now())
	// What it dropped and forgot is a purge of personal data: recorded, as
	// `purge` is, even when a step failed.
	if rerr := e.record(ctx, audit.ActionPurge, "retention", args, rep.Forgotten+rep.LegacyPurged); rerr != nil {
		return errors.Join(err, rerr)
	}
	if perr := printJSON(stdout, rep); perr != nil {
		return perr
	}
	return err
}
