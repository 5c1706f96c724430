package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
)

// changeFilter selects change records by resource; an empty field matches
// any value.
type changeFilter struct {
	provider, account, environment, typ string
}

func (f changeFilter) match(c message.Change) bool {
	return (f.provider == "" || f.provider == c.Provider) && (f.account == "" || f.account == c.SourceAccount) &&
		(f.environment == "" || f.environment == c.Environment) && (f.typ == "" || f.typ == c.Type)
}

const changesUsage = "changes tail [-type T] [-account A] [-provider P] [-environment E] [-from-beginning] | changes republish [-batch N]"

// changesCmd runs `changes tail`: follow the changes topic from the
// terminal, one JSON line per record, until interrupted. It reads Kafka
// only (no database, no consumer group: it commits nothing and moves no
// other consumer). `changes republish` opens the database itself.
func changesCmd(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	if len(args) > 0 && args[0] == "republish" {
		return republishChanges(ctx, e, args[1:], stdout)
	}
	if len(args) == 0 || args[0] != "tail" {
		return usageErr(changesUsage)
	}
	fs := flag.NewFlagSet("changes tail", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f changeFilter
	fs.StringVar(&f.typ, "type", "", "only this resource type (subscription, customer, ...)")
	fs.StringVar(&f.account, "account", "", "only this source account")
	fs.StringVar(&f.provider, "provider", "", "only this provider")
	fs.StringVar(&f.environment, "environment", "", "only this environment")
	fromStart := fs.Bool("from-beginning", false, "read the topic from its start (every projection, then what follows)")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return usageErr("%s%s", changesUsage, errSuffix(err))
	}
	if e.cfg.Kafka.ChangesTopic == "" {
		return errNoChangeStream
	}
	return tailChanges(ctx, brokers(e.cfg), e.cfg.Kafka.ChangesTopic, f, *fromStart, stdout, e.log)
}

// tailChanges prints the records of topic that f selects, as compact JSON
// lines, until ctx ends. A record that is not a change is reported on the
// log and skipped.
func tailChanges(ctx context.Context, seeds []string, topic string, f changeFilter, fromStart bool, out io.Writer, log *slog.Logger) error {
	start := kgo.NewOffset().AtEnd()
	if fromStart {
		start = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(start))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	var line bytes.Buffer
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		// The client retries what it can (a topic not created yet, a broker
		// away): say so, and keep following.
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				log.WarnContext(ctx, "reading the changes topic", slog.String("topic", t), slog.Int("partition", int(p)),
					slog.String("error", err.Error()))
			}
		})
		for it := fetches.RecordIter(); !it.Done(); {
			r := it.Next()
			c, err := message.DecodeChange(r.Value)
			if err != nil {
				log.WarnContext(ctx, "not a change record; skipped", slog.String("topic", r.Topic),
					slog.Int("partition", int(r.Partition)), slog.Int64("offset", r.Offset), slog.String("error", err.Error()))
				continue
			}
			if !f.match(c) {
				continue
			}
			line.Reset()
			if err := json.Compact(&line, r.Value); err != nil {
				return fmt.Errorf("print change: %w", err)
			}
			line.WriteByte('\n')
			if _, err := out.Write(line.Bytes()); err != nil {
				return err
			}
		}
	}
	return nil
}

// republishChanges runs `changes republish`: a change record (decision
// current) of every projection into the outbox, for the relays to publish
// in order with the resources' own changes. For projections stored before
// changes were published, or a consumer that lost its copy of the topic.
func republishChanges(ctx context.Context, e *env, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("changes republish", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	batch := fs.Int("batch", projection.RepublishBatchDefault, "projections per statement (and transaction)")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 || *batch <= 0 {
		return usageErr("changes republish [-batch N]%s", errSuffix(err))
	}
	if e.cfg.Kafka.ChangesTopic == "" {
		return errNoChangeStream
	}
	if e.pool == nil {
		pool, err := openDB(ctx, e.cfg, e.log, 2)
		if err != nil {
			return err
		}
		defer pool.Close()
		e.pool = pool
	}
	n, err := projection.Republish(ctx, e.pool, e.cfg.Kafka.ChangesTopic, *batch, func(done int64) {
		e.log.InfoContext(ctx, "republishing projections", slog.Int64("queued", done))
	})
	if err != nil {
		return fmt.Errorf("changes republish: %d queued before: %w", n, err)
	}
	return printJSON(stdout, map[string]any{"queued": n, "topic": e.cfg.Kafka.ChangesTopic})
}

// errNoChangeStream: the config turned the change stream off.
var errNoChangeStream = errors.New("changes: the change stream is off (changes.publish: false); nothing is written to a changes topic")
