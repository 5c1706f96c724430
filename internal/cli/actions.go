package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// actionFlags declares the filters actions list and actions replay share.
func actionFlags(fs *flag.FlagSet, f *action.Filter, since *timeValue) {
	fs.StringVar(&f.Provider, "provider", "", "only this provider")
	fs.StringVar(&f.SourceAccount, "account", "", "only this source account")
	fs.StringVar(&f.Environment, "environment", "", "only this environment")
	fs.StringVar(&f.Kind, "kind", "", "only this kind (receipt)")
	fs.Var(since, "since", "only actions recorded since (24h or an RFC 3339 time)")
}

// actionsCmd runs `actions list|show|replay|skip`: external effects, listed,
// shown and replayed like dead events; a dead one can be given up (skip).
func actionsCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErr("actions needs list, show, replay or skip")
	}
	fs := flag.NewFlagSet("actions "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f action.Filter
	var since timeValue
	switch args[0] {
	case "list":
		actionFlags(fs, &f, &since)
		fs.StringVar(&f.Status, "status", action.StatusDead, "status: dead, pending, sending, failed, ambiguous, sent, skipped")
		fs.IntVar(&f.Limit, "limit", action.ListLimitDefault, "most actions to list")
		pos, err := parseInterleaved(fs, args[1:])
		if err != nil || len(pos) > 0 || f.Limit <= 0 {
			return usageErr("actions list [-status dead] [-provider P] [-account A] [-environment E] [-kind K] [-since 24h] [-limit N]%s", errSuffix(err))
		}
		f.Since = since.t
		rows, err := action.List(ctx, e.pool, f)
		if err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"actions": rows, "count": len(rows)})
	case "show":
		pos, err := parseInterleaved(fs, args[1:])
		if err != nil || len(pos) != 5 {
			return usageErr("actions show PROVIDER ACCOUNT ENV SUBJECT KIND%s", errSuffix(err))
		}
		sh, err := action.Show(ctx, e.pool, actionKey(pos), e.cfg.Effects.Declare)
		if err != nil {
			return err
		}
		if sh.Action.Status == action.StatusPending {
			sh.Waiting = actionsWaiting(e.cfg)[sh.Action.Kind]
		}
		return printJSON(stdout, sh)
	case "replay":
		actionFlags(fs, &f, &since)
		fs.IntVar(&f.Limit, "limit", action.ReplayLimitDefault, "most actions to replay")
		pos, err := parseInterleaved(fs, args[1:])
		if err != nil || (len(pos) != 0 && len(pos) != 5) || f.Limit <= 0 {
			return usageErr("actions replay PROVIDER ACCOUNT ENV SUBJECT KIND, or actions replay [filters of actions list] [-limit N]%s", errSuffix(err))
		}
		if len(pos) == 5 {
			var set []string
			fs.Visit(func(fl *flag.Flag) { set = append(set, "-"+fl.Name) })
			if len(set) > 0 {
				return usageErr("actions replay of one action takes no filters (%s)", strings.Join(set, " "))
			}
			err := action.ReplayDead(ctx, e.pool, actionKey(pos))
			if errors.Is(err, action.ErrNotDead) {
				return fmt.Errorf("%w; only dead actions are replayed (a sent one is never sent again)", err)
			}
			if err != nil {
				return err
			}
			return e.printChange(ctx, stdout, audit.ActionReplayAction, "actions replay", args[1:], 1)
		}
		f.Since = since.t
		n, err := action.ReplayDeadMatching(ctx, e.pool, f)
		if err != nil {
			return err
		}
		return e.printChange(ctx, stdout, audit.ActionReplayAction, "actions replay", args[1:], n)
	case "skip":
		reason := fs.String("reason", "", "why the action is given up (kept in its last error and the audit record)")
		pos, err := parseInterleaved(fs, args[1:])
		if err != nil || len(pos) != 5 {
			return usageErr("actions skip PROVIDER ACCOUNT ENV SUBJECT KIND [-reason R]%s", errSuffix(err))
		}
		err = action.Skip(ctx, e.pool, actionKey(pos), *reason)
		if errors.Is(err, action.ErrNotDead) {
			return fmt.Errorf("%w; only dead actions are skipped", err)
		}
		if err != nil {
			return err
		}
		if err := e.record(ctx, audit.ActionSkipAction, "actions skip", args[1:], 1); err != nil {
			return err
		}
		return printJSON(stdout, map[string]any{"skipped": 1})
	}
	return usageErr("actions %s: unknown, want list, show, replay or skip", args[0])
}

func actionKey(pos []string) action.Key {
	return action.Key{Provider: pos[0], SourceAccount: pos[1], Environment: pos[2], SubjectID: pos[3], Kind: pos[4]}
}
