package processor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	actions "github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/db"
	facts "github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/fence"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
)

// writeLockTimeout bounds each wait of a batch's transaction for a row
// lock; the batch is retried after it.
const writeLockTimeout = "30s"

// writeSettingsSQL sets a batch's transaction up, in one statement:
//   - every statement of the batch touches rows by primary key; for
//     batches of thousands the planner would otherwise hash-join whole
//     tables;
//   - a row lock held by another service's orphaned transaction fails the
//     batch (55P03, retried) instead of stopping the partition until TCP
//     keepalive ends the orphan.
const writeSettingsSQL = `SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
    set_config('lock_timeout', '` + writeLockTimeout + `', true)`

// errNoFetcher: the provider has no API client configured.
var errNoFetcher = errors.New("no fetcher for provider")

type inboxRow struct {
	provider, account, env, eventID string
	endpointID, eventType           string
	resourceType, resourceID        string
	version                         *int64
	payload                         []byte
	status                          string
	attempts                        int
	receivedAt                      time.Time
	// firstFailedAt is when the current run of failures began; nil when
	// the event has not failed since it was received or replayed.
	firstFailedAt *time.Time
}

func (r *inboxRow) key() inbox.Key {
	return inbox.Key{Provider: r.provider, SourceAccount: r.account, Environment: r.env, EventID: r.eventID}
}

// load reads the inbox rows of msgs' events.
func (w *worker) load(ctx context.Context, msgs []message.Message) (map[inbox.Key]*inboxRow, error) {
	var keys []inbox.Key
	for _, m := range msgs {
		if m.Kind == message.KindEvent {
			keys = append(keys, inbox.Key{Provider: m.Provider, SourceAccount: m.SourceAccount, Environment: m.Environment, EventID: m.EventID})
		}
	}
	loaded, err := inbox.Load(ctx, w.p.pool, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[inbox.Key]*inboxRow, len(loaded))
	for k, l := range loaded {
		out[k] = &inboxRow{provider: l.Provider, account: l.SourceAccount, env: l.Environment, eventID: l.EventID,
			endpointID: l.EndpointID, eventType: l.EventType, resourceType: l.ResourceType, resourceID: l.ResourceID,
			version: l.Version, payload: l.Payload, status: l.Status, attempts: l.Attempts, receivedAt: l.ReceivedAt,
			firstFailedAt: l.FirstFailedAt}
	}
	return out, nil
}

// step is one message of a batch and what became of it.
type step struct {
	msg  message.Message
	row  *inboxRow
	plan provider.Plan
	err  error // malformed: dead at once
	// res is set while writing.
	res projection.Result
	// Set by settle: the history outcome, whether the step failed, and what
	// a reconciliation check found.
	outcome string
	failed  bool
	finding string
	// trace is the event's span; its context parents the fetch and the
	// projection write.
	trace *eventTrace
}

type fetchResult struct {
	f   provider.Fetched
	err error
	// start is read from the database just before the provider call: it
	// orders the observation, which a later write of an older fetch cannot
	// overwrite.
	start projection.FetchStart
	// res is what the write did (Fetched, or Stale when the projection
	// holds a later observation) and the Label of what it found.
	res projection.Result
}

// handle processes one polled batch of one partition: plan, fetch with no
// transaction open, then one transaction that checks the fence, applies
// every write and marks every event.
func (w *worker) handle(ctx context.Context, recs []*kgo.Record) (err error) {
	tr := w.startBatchTrace(ctx, recs)
	defer func() { tr.end(err) }()
	msgs := make([]message.Message, 0, len(recs))
	evs := make([]*eventTrace, 0, len(recs))
	for _, r := range recs {
		m, err := message.Decode(r.Value)
		if err != nil {
			// Not ours to park: there is no inbox row. The record stays in
			// the topic; count and report it.
			w.p.metrics.undecodable.Inc()
			w.p.log.WarnContext(ctx, "undecodable record", slog.String("topic", r.Topic),
				slog.Int("partition", int(r.Partition)), slog.Int64("offset", r.Offset), slog.String("error", err.Error()))
			continue
		}
		msgs = append(msgs, m)
		evs = append(evs, tr.event(r, m))
	}
	rows, err := w.load(ctx, msgs)
	if err != nil {
		return err
	}
	steps := make([]*step, 0, len(msgs))
	seen := make(map[inbox.Key]bool, len(msgs))
	for i, m := range msgs {
		st := &step{msg: m, trace: evs[i]}
		if m.Kind == message.KindCheck {
			st.plan = provider.Plan{Fetch: true}
			steps = append(steps, st)
			continue
		}
		k := inbox.Key{Provider: m.Provider, SourceAccount: m.SourceAccount, Environment: m.Environment, EventID: m.EventID}
		row := rows[k]
		if row == nil {
			w.p.metrics.events.WithLabelValues("missing").Inc()
			evs[i].outcome = "missing"
			w.p.log.WarnContext(ctx, "message names no inbox row", slog.String("key", m.Resource.Key()), slog.String("event_id", m.EventID))
			continue
		}
		if row.status != inbox.StatusPending || seen[k] {
			// Already handled: a repeated publish, or a copy in this batch.
			w.p.metrics.events.WithLabelValues("already_handled").Inc()
			evs[i].outcome = "already_handled"
			continue
		}
		seen[k] = true
		st.row = row
		st.plan, st.err = w.p.interpret(row, w.p.endpoints[row.endpointID])
		st.plan = w.p.minimise(row.provider, st.plan)
		steps = append(steps, st)
	}
	if len(steps) == 0 {
		return nil
	}
	fetched := w.fetchAll(ctx, steps)
	return w.write(ctx, steps, fetched)
}

// fetchAll fetches each resource the batch hints at once, however many
// hints name it. Distinct resources are fetched concurrently, at most
// FetchConcurrency at a time; the provider client's rate limiter and breaker
// still bound the total.
func (w *worker) fetchAll(ctx context.Context, steps []*step) map[string]*fetchResult {
	out := make(map[string]*fetchResult)
	plans := fetchPlans(steps)
	// The listings' states, in one read. A check whose state is gone (its
	// record was handled before, then redelivered) fetches instead; a read
	// that failed retries the batch's fetches like a fetch start that
	// failed.
	var keys []projection.ListedKey
	for _, st := range steps {
		if p := plans[st.msg.Resource.Key()]; p != nil && p.listedSeq > 0 && p.listedSeq == st.msg.ListedSeq {
			keys = append(keys, projection.ListedKey{Resource: st.msg.Resource, Seq: p.listedSeq})
		}
	}
	listed, listedErr := projection.LoadListed(ctx, w.p.pool, keys)
	var g errgroup.Group
	g.SetLimit(w.p.cfg.FetchConcurrency)
	for _, st := range steps {
		if st.err != nil || !st.plan.Fetch {
			continue
		}
		key := st.msg.Resource.Key()
		if _, ok := out[key]; ok {
			continue
		}
		fr := &fetchResult{}
		out[key] = fr
		if seq := plans[key].listedSeq; seq > 0 {
			if listedErr != nil {
				fr.err = fmt.Errorf("%w: %w", provider.ErrNotAttempted, listedErr)
				continue
			}
			if l, ok := listed[projection.ListedKey{Resource: st.msg.Resource, Seq: seq}]; ok {
				fr.f, fr.start = listedFetched(l), l.Start
				fr.f.State = w.p.keepState(fr.f.State)
				continue
			}
		}
		f := w.p.cfg.Fetchers[st.msg.Provider]
		if f == nil {
			fr.err = errNoFetcher
			continue
		}
		res := st.msg.Resource
		// The first event that asks for the resource owns the call's span.
		ctx := ctx
		if st.trace != nil {
			ctx = st.trace.ctx
		}
		if plans[key].background {
			ctx = provider.Background(ctx)
		}
		g.Go(func() error {
			// Numbered by the database, not by our clock: observations of
			// several processes are compared by it. Read with no transaction
			// open, before the call, so it is never later than what the
			// provider saw.
			var err error
			if fr.start, err = projection.StartFetch(ctx, w.p.pool); err != nil {
				fr.err = fmt.Errorf("%w: %w", provider.ErrNotAttempted, err)
				return nil
			}
			start := time.Now()
			fr.f, fr.err = f.Fetch(ctx, res)
			fr.f.State = w.p.keepState(fr.f.State)
			w.p.metrics.fetchSeconds.Observe(time.Since(start).Seconds())
			w.p.metrics.fetches.Inc()
			return nil
		})
	}
	_ = g.Wait()
	return out
}

// mark is an event's inbox mark and, for a hint that died, the parking of
// its resource's projection (needs_reconcile).
type mark struct {
	inbox.Mark
	reconcile *projection.Parking
}

func (w *worker) write(ctx context.Context, steps []*step, fetched map[string]*fetchResult) error {
	now := w.p.cfg.Now()
	var hist []projection.HistoryEntry
	var marks []mark
	// Whether the committed transaction queued change records: the relays
	// are woken for them.
	var changed bool
	txStart := time.Now()
	// Two round trips: BEGIN goes with the writes, COMMIT with what
	// they did.
	err := func() error {
		tx, err := db.BeginBatches(ctx, w.p.pool)
		if err != nil {
			return err
		}
		defer tx.Close(ctx)
		hist, marks = hist[:0], marks[:0]
		b := &pgx.Batch{}
		b.Queue(writeSettingsSQL)
		fence.QueueCheck(b, w.tok)
		var changes *projection.Changes
		if w.p.cfg.ChangesTopic != "" {
			changes = projection.NewChanges(w.p.cfg.ChangesTopic)
		}
		written := make(map[string]bool)
		for _, st := range steps {
			st.res = projection.Result{}
			if st.err != nil {
				continue
			}
			m := st.msg
			if s := st.plan.Snapshot; s != nil {
				v := s.Version
				ep := w.p.endpoints[st.row.endpointID]
				projection.QueueVersioned(b, projection.Write{Resource: m.Resource, Version: &v, State: s.State,
					Status: s.Status, Deleted: s.Deleted, EventID: m.EventID, Generation: w.tok.Generation,
					Incremental: ep != nil && ep.Incremental, Changes: changes}, &st.res)
			}
			if st.plan.Fetch {
				fr := fetched[m.Resource.Key()]
				if fr.err == nil && !written[m.Resource.Key()] {
					written[m.Resource.Key()] = true
					projection.QueueFetchedResult(b, projection.Write{Resource: m.Resource, State: fr.f.State, Status: fr.f.Status,
						Deleted: fr.f.Deleted, EventID: m.EventID, Generation: w.tok.Generation, Changes: changes},
						fr.start, &fr.res)
				}
			}
			if k, ok := listedKey(m); ok {
				// Handled with this transaction, whatever came of it.
				projection.QueueDeleteListed(b, k)
			}
			if st.row != nil {
				for _, f := range st.plan.Facts {
					facts.QueueRecord(b, factRecord(m, f))
				}
				for _, a := range st.plan.Actions {
					actions.QueueRecord(b, actions.Record{Key: actions.Key{Provider: m.Provider, SourceAccount: m.SourceAccount,
						Environment: m.Environment, SubjectID: a.Subject, Kind: a.Kind}, EventID: m.EventID, TraceParent: st.trace.parent()})
				}
			}
		}
		if err := tx.Send(ctx, b); err != nil {
			return err
		}
		// Second round: what happened, in the same transaction.
		transitions := w.transitions(steps, fetched)
		var refresh []projection.Refresh
		var parks []projection.Parking
		for _, st := range steps {
			hist, marks = w.settle(st, fetched, now, hist, marks)
			refresh, parks = refreshes(st, marks, refresh, parks)
		}
		b = &pgx.Batch{}
		// The change records of the writes above, in their order: the
		// projection rows they describe stay locked until commit.
		changed = changes.Len() > 0
		changes.Queue(b)
		queueTransitions(b, transitions)
		projection.QueueHistory(b, hist)
		queueMarks(b, marks)
		projection.QueueRefresh(b, refresh)
		projection.QueueNeedsReconcile(b, parks)
		return tx.Commit(ctx, b)
	}()
	writeSpans(steps, txStart, time.Now(), err)
	if err != nil {
		if errors.Is(err, fence.ErrFenced) {
			w.recordFenced(ctx, steps, err)
		}
		return fmt.Errorf("write batch of %d: %w", len(steps), err)
	}
	if changed {
		w.p.changes.Wake()
	}
	done := w.p.cfg.Now()
	for _, mk := range marks {
		w.p.metrics.events.WithLabelValues(mk.Status).Inc()
	}
	for _, h := range hist {
		w.p.metrics.outcomes.WithLabelValues(h.Outcome).Inc()
	}
	for _, st := range steps {
		m := st.msg
		if st.failed {
			w.p.metrics.failures.WithLabelValues(w.p.failureLabels(m, eventTypeLabel(st))...).Inc()
		}
		// A replay's lag would be measured from the original arrival.
		if st.row != nil && m.Reason != message.ReasonReplay && (st.outcome == projection.Applied || st.outcome == projection.Fetched) {
			w.p.metrics.receiveToApply.WithLabelValues(m.Provider).Observe(max(done.Sub(st.row.receivedAt).Seconds(), 0))
		}
		if st.finding == projection.Diverged || st.finding == projection.Missing {
			w.p.metrics.checkDivergences.WithLabelValues(m.Provider).Inc()
		}
		if st.outcome == projection.Conflict {
			w.p.metrics.versionConflicts.WithLabelValues(m.Provider).Inc()
		}
	}
	return nil
}

// eventTypeLabel is the event type a failure is counted under: the inbox
// row's, or "check" for a reconciliation check.
func eventTypeLabel(st *step) string {
	switch {
	case st.row != nil:
		return st.row.eventType
	case st.msg.Kind == message.KindCheck:
		return message.KindCheck
	}
	return st.msg.EventType
}

// recordFenced notes in the history that this worker's transaction for
// steps was refused because its partition was taken over. It is history,
// not a projection write, so it needs no fence; it is best effort: the new
// owner handles the events whatever becomes of this note.
func (w *worker) recordFenced(ctx context.Context, steps []*step, cause error) {
	hist := make([]projection.HistoryEntry, 0, len(steps))
	for _, st := range steps {
		hist = append(hist, projection.HistoryEntry{Resource: st.msg.Resource, EventID: st.msg.EventID,
			Outcome: projection.Fenced, Generation: w.tok.Generation, Detail: cause.Error()})
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b := &pgx.Batch{}
	projection.QueueHistory(b, hist)
	if err := w.p.pool.SendBatch(ctx, b).Close(); err != nil {
		w.p.log.Warn("record fenced writes in history", slog.Int("partition", int(w.part)), slog.String("error", err.Error()))
	}
}

// settle decides each step's history entry and inbox mark.
func (w *worker) settle(st *step, fetched map[string]*fetchResult, now time.Time, hist []projection.HistoryEntry, marks []mark) ([]projection.HistoryEntry, []mark) {
	m := st.msg
	entry := projection.HistoryEntry{Resource: m.Resource, EventID: m.EventID, Generation: w.tok.Generation}
	var failure error
	switch {
	case st.err != nil:
		failure = st.err
	case st.plan.Snapshot != nil:
		s := st.plan.Snapshot
		v, prev := s.Version, st.res.Previous
		entry.Outcome, entry.Version, entry.Status, entry.Deleted, entry.Previous = st.res.Outcome, &v, s.Status, s.Deleted, &prev
		if st.res.Outcome == projection.Gap {
			// A delta past a missing version: parked, so it applies once the
			// missing one landed, and dead (inspectable) if it never does.
			failure = fmt.Errorf("version gap: %d does not follow the projection's version", v)
		}
	case st.plan.Fetch:
		fr := fetched[m.Resource.Key()]
		switch {
		case errors.Is(fr.err, errNoFetcher):
			entry.Outcome, entry.Detail = projection.Recorded, "no API client for provider; hint not fetched"
		case fr.err != nil:
			failure = fr.err
			entry.Outcome, entry.Detail = projection.FetchFailed, fr.err.Error()
			if errors.Is(fr.err, provider.ErrNotFound) {
				entry.Outcome = projection.FetchNotFound
			}
			if m.Kind == message.KindCheck {
				entry.Detail = checkPrefix(m) + entry.Detail
			}
		case fr.res.Outcome == projection.Stale:
			// Another writer stored an observation fetched after ours.
			prev := fr.res.Previous
			entry.Outcome, entry.Status, entry.Deleted, entry.Previous = projection.Stale, fr.f.Status, fr.f.Deleted, &prev
			entry.Detail = "fetched state not written: the projection holds an observation fetched later"
		default:
			prev := fr.res.Previous
			entry.Outcome, entry.Status, entry.Deleted, entry.Previous = projection.Fetched, fr.f.Status, fr.f.Deleted, &prev
			if m.Kind == message.KindCheck && m.Reason != message.ReasonRefresh {
				st.finding = projection.Finding(prev, fr.f.Status, fr.f.Deleted)
				entry.Detail = checkDetail(st.finding, prev, projection.Label(fr.f.Status, fr.f.Deleted))
			}
			// The resource is written once per batch: later steps of the
			// batch found what this one wrote.
			fr.res.Previous = projection.Label(fr.f.Status, fr.f.Deleted)
		}
	default:
		entry.Outcome = projection.Recorded
	}
	st.outcome, st.failed = entry.Outcome, failure != nil
	if entry.Outcome != "" && (entry.Outcome != projection.Recorded || m.Kind == message.KindCheck || len(st.plan.Facts) > 0) {
		hist = append(hist, entry)
	}
	if st.row == nil {
		return hist, marks
	}
	mk := mark{Mark: inbox.Mark{Key: st.row.key(), Status: inbox.StatusProcessed, Outcome: entry.Outcome, Attempts: st.row.attempts}}
	if failure != nil {
		msg := failure.Error()
		mk.LastErr, mk.Outcome = &msg, "failed"
		if entry.Outcome == projection.Gap {
			mk.Outcome = projection.Gap
		}
		if !errors.Is(failure, provider.ErrNotAttempted) {
			mk.Attempts++
		}
		first := now
		if st.row.firstFailedAt != nil {
			first = *st.row.firstFailedAt
		}
		mk.FirstFailed = &first
		if errors.Is(failure, provider.ErrMalformed) || w.p.exhausted(first, now, mk.Attempts) {
			mk.Status = inbox.StatusDead
			if st.plan.Fetch {
				// The provider's state never arrived: the projection may be
				// wrong (a cancellation not applied). The reconciler checks
				// every projection marked so.
				mk.reconcile = &projection.Parking{Resource: m.Resource, Reason: deadReason(m.EventID, msg)}
			}
			w.p.log.Warn("event dead", slog.String("event_id", m.EventID), slog.String("key", m.Resource.Key()),
				slog.Int("attempts", mk.Attempts), slog.Time("failing_since", first), slog.String("error", msg))
		} else {
			mk.Status = inbox.StatusRetrying
			next := w.p.nextAttempt(first, now, failure)
			mk.Next = &next
		}
	}
	return hist, append(marks, mk)
}

// refreshes adds the checks st's event asks for other resources (its
// plan's Refresh) once the event is settled (processed or dead, not while
// it waits for a retry that would ask again), and parks the projection of
// a refresh check whose fetch failed: no event is retried for it, so the
// reconciler checks it until a fetch succeeds.
func refreshes(st *step, marks []mark, refresh []projection.Refresh, parks []projection.Parking) ([]projection.Refresh, []projection.Parking) {
	m := st.msg
	if st.row == nil {
		if st.failed && m.Kind == message.KindCheck && m.Reason == message.ReasonRefresh {
			parks = append(parks, projection.Parking{Resource: m.Resource, Reason: "refresh after event " + m.EventID + " failed"})
		}
		return refresh, parks
	}
	if len(st.plan.Refresh) == 0 || len(marks) == 0 || marks[len(marks)-1].Status == inbox.StatusRetrying {
		return refresh, parks
	}
	for _, r := range st.plan.Refresh {
		res := message.Resource{Provider: m.Provider, SourceAccount: m.SourceAccount, Environment: m.Environment, Type: r.Type, ID: r.ID}
		if res == m.Resource {
			continue
		}
		refresh = append(refresh, projection.Refresh{Resource: res, EventID: m.EventID})
	}
	return refresh, parks
}

// checkPrefix names the kind of check a failed fetch was for.
func checkPrefix(m message.Message) string {
	if m.Reason == message.ReasonRefresh {
		return "refresh after event " + m.EventID + ": "
	}
	return "reconcile check: "
}

// checkDetail says in words what a reconciliation check found.
func checkDetail(finding, previous, found string) string {
	switch finding {
	case projection.InSync:
		return "reconcile check: in sync (" + found + ")"
	case projection.Missing:
		return "reconcile check: no projection; provider has " + found
	}
	return "reconcile check: diverged: projection had " + previous + ", provider has " + found
}

// queueMarks queues the batch's inbox marks, then the parking of the
// projections of hints that died.
func queueMarks(b *pgx.Batch, marks []mark) {
	if len(marks) == 0 {
		return
	}
	ms := make([]inbox.Mark, 0, len(marks))
	var reconcile []projection.Parking
	for _, mk := range marks {
		ms = append(ms, mk.Mark)
		if mk.reconcile != nil {
			reconcile = append(reconcile, *mk.reconcile)
		}
	}
	inbox.QueueMarks(b, ms)
	projection.QueueNeedsReconcile(b, reconcile)
}

// deadReason is the needs_reconcile reason of a projection whose event
// died with msg.
func deadReason(eventID, msg string) string {
	return "event " + eventID + " dead: " + msg
}
