package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	actionpkg "github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/explain"
)

// Row is one line of the table: an invariant, what was checked, and the
// resources that broke it.
type Row struct {
	Invariant  string
	Checked    string
	Violations int
	// Resources are up to a few broken ones, explained after the table.
	Resources []message.Resource
}

// Stall is how long a faulted processor's partitions made no progress.
type Stall struct {
	Fault      string
	Detail     string
	Partitions int
	// Took is the longest time, over the partitions it owned, from the
	// fault to the first event processed on that partition; -1 when no
	// event arrived on them afterwards.
	Took time.Duration
	// Moved is when all of them had a new owner's fence; 0 if not seen.
	Moved time.Duration
}

// Report is a run's outcome.
type Report struct {
	Seed                                           int64
	Digest                                         string
	Subscriptions, Events                          int
	Dropped, Duplicated, Concurrent, Faults        int
	Deliveries, Retries                            int
	Samples                                        int
	TrafficTook, QuiesceTook                       time.Duration
	Settled                                        bool
	Exited                                         []string
	Rows                                           []Row
	Stalls                                         []Stall
	ReceiptsSent, ReceiptsRepeated, ReceiptActions int
}

func (r Report) violated() bool {
	for _, row := range r.Rows {
		if row.Violations > 0 {
			return true
		}
	}
	return len(r.Exited) > 0
}

// MaxStall is the longest partition stall after a kill or a pause.
func (r Report) MaxStall() time.Duration {
	var m time.Duration
	for _, s := range r.Stalls {
		m = max(m, s.Took)
	}
	return m
}

type projRow struct {
	status  string
	version *int64
	cape    bool
}

func (s *system) projections(ctx context.Context) (map[string]projRow, error) {
	rows, err := s.pool.Query(ctx, `
SELECT resource_id, coalesce(status, ''), provider_version, coalesce((state->>'cancel_at_period_end')::boolean, false)
FROM projection
WHERE environment = $1 AND ((provider = 'stripe' AND source_account = $2) OR (provider = 'chargebee' AND source_account = $3))`,
		environmentName, stripeAccount, cbSite)
	if err != nil {
		return nil, err
	}
	out := map[string]projRow{}
	var id string
	var pr projRow
	_, err = pgx.ForEachRow(rows, []any{&id, &pr.status, &pr.version, &pr.cape}, func() error {
		out[id] = pr
		return nil
	})
	return out, err
}

// mismatches lists the subscriptions whose projection is not the
// provider's final state.
func (s *system) mismatches(ctx context.Context, tr *traffic) ([]int, error) {
	proj, err := s.projections(ctx)
	if err != nil {
		return nil, err
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var bad []int
	for i, sb := range tr.p.subs {
		last := sb.steps[len(sb.steps)-1]
		pr, ok := proj[sb.id]
		switch {
		case !ok || pr.status != last.status:
			bad = append(bad, i)
		case sb.prov == stripeProv && pr.cape != last.cancelAtPeriodEnd:
			bad = append(bad, i)
		case sb.prov == chargebeeProv && (pr.version == nil || *pr.version != tr.truthVersion[i]):
			bad = append(bad, i)
		}
	}
	return bad, nil
}

func (s *system) pending(ctx context.Context) (pending, dead int, err error) {
	err = s.pool.QueryRow(ctx, `
SELECT (SELECT count(*) FROM webhook_inbox WHERE status IN ('pending', 'retrying')) + (SELECT count(*) FROM outbox)
       + (SELECT count(*) FROM action WHERE status IN ('pending', 'sending', 'failed', 'ambiguous')),
       (SELECT count(*) FROM webhook_inbox WHERE status = 'dead')`).Scan(&pending, &dead)
	return pending, dead, err
}

// quiesce waits until nothing is pending and every projection is the
// provider's final state, or the timeout; it returns how long it waited.
func (s *system) quiesce(ctx context.Context, tr *traffic, timeout time.Duration) time.Duration {
	began := time.Now()
	deadline := began.Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		n, _, err := s.pending(ctx)
		if err == nil && n == 0 {
			if bad, err := s.mismatches(ctx, tr); err == nil && len(bad) == 0 {
				return time.Since(began)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	return time.Since(began)
}

func (s *system) resource(sb sub) message.Resource {
	if sb.prov == chargebeeProv {
		return message.Resource{Provider: chargebeeProv, SourceAccount: cbSite, Environment: environmentName, Type: "subscription", ID: sb.id}
	}
	return message.Resource{Provider: stripeProv, SourceAccount: stripeAccount, Environment: environmentName, Type: "subscription", ID: sb.id}
}

func firstFew(rs []message.Resource) []message.Resource { return rs[:min(len(rs), 3)] }

// check evaluates every invariant.
func (s *system) check(ctx context.Context, rep *Report, tr *traffic, sm *sampler, in *injector) {
	tr.mu.Lock()
	rep.Deliveries, rep.Retries = tr.deliveries, tr.retries
	tr.mu.Unlock()
	p := tr.p

	// 1. Projections equal the provider's final state.
	row := Row{Invariant: "projection equals the provider's final state", Checked: fmt.Sprintf("%d subscriptions", len(p.subs))}
	bad, err := s.mismatches(ctx, tr)
	if err != nil {
		row.Violations, row.Checked = 1, "error: "+err.Error()
	}
	rep.Settled = err == nil && len(bad) == 0
	for _, i := range bad {
		row.Violations++
		row.Resources = append(row.Resources, s.resource(p.subs[i]))
	}
	row.Resources = firstFew(row.Resources)
	rep.Rows = append(rep.Rows, row)

	// 2. Access is never granted again once an immediate cancellation
	// that ends the lifecycle was seen. A Chargebee subscription may be
	// cancelled and reactivated before its last cancellation: only a sample
	// of the final version counts as having seen that one.
	tr.mu.Lock()
	finalVersion := maps.Clone(tr.truthVersion)
	tr.mu.Unlock()
	sm.mu.Lock()
	samples := slices.Clone(sm.all)
	sm.mu.Unlock()
	rep.Samples = len(samples)
	row = Row{Invariant: "access never re-granted after an immediate cancellation was observed"}
	closedAt := map[int]time.Time{}
	checked := 0
	for _, smp := range samples {
		sb := p.subs[smp.sub]
		if !sb.terminalCancel {
			continue
		}
		checked++
		if at, ok := closedAt[smp.sub]; ok && smp.access && smp.at.After(at) {
			row.Violations++
			row.Resources = append(row.Resources, s.resource(sb))
			continue
		}
		final := sb.prov == stripeProv || (smp.version != nil && *smp.version == finalVersion[smp.sub])
		if final && !smp.access && (smp.status == "canceled" || smp.status == "cancelled") {
			if _, ok := closedAt[smp.sub]; !ok {
				closedAt[smp.sub] = smp.at
			}
		}
	}
	row.Checked = fmt.Sprintf("%d samples of %d access answers, %d after a cancellation", checked, len(samples), countAfter(samples, closedAt))
	row.Resources = firstFew(row.Resources)
	rep.Rows = append(rep.Rows, row)

	// 3. Applied versions never go backwards.
	rep.Rows = append(rep.Rows, s.checkVersions(ctx))

	// 4. Every paid invoice is recorded exactly once.
	rep.Rows = append(rep.Rows, s.checkInvoices(ctx, p))

	// 5. Receipts: one action per paid invoice, and none sent again after a
	// definite success.
	// When hookyard recorded each receipt sent, by the database clock
	// (the harness shares the machine's clock with Postgres).
	sentAt := map[string]time.Time{}
	var actions, recordedSent int
	if rows, err := s.pool.Query(ctx, `SELECT provider, source_account, environment, subject_id, kind, done_at FROM action
WHERE kind = 'receipt' AND status = 'sent' AND done_at IS NOT NULL`); err == nil {
		for rows.Next() {
			var k actionpkg.Key
			var done time.Time
			if rows.Scan(&k.Provider, &k.SourceAccount, &k.Environment, &k.SubjectID, &k.Kind, &done) == nil {
				sentAt[k.String()] = done
			}
		}
		rows.Close()
	}
	recordedSent = len(sentAt)
	sent, resent, after, produced := receiptCounts(s.receipts, sentAt)
	rep.ReceiptsSent, rep.ReceiptsRepeated = sent, after
	row = Row{Invariant: "no receipt sent twice after a definite success", Violations: after}
	_ = s.pool.QueryRow(ctx, `SELECT count(*) FROM action WHERE kind = 'receipt'`).Scan(&actions)
	rep.ReceiptActions = actions
	row.Checked = fmt.Sprintf("%d receipt actions, %d recorded sent, %d keys received (%d more than once, same key: a sender killed before recording success), %d produced",
		actions, recordedSent, sent, resent, produced)
	if sent != actions || recordedSent != actions || produced != actions {
		// Every paid invoice's receipt must be sent and recorded by quiesce.
		row.Violations++
		row.Checked += "; not every receipt was sent and recorded"
	}
	rep.Rows = append(rep.Rows, row)

	// 6. Every 2xx has its rows in the inbox.
	rep.Rows = append(rep.Rows, s.checkAcked(ctx, tr))

	// 7. Nothing left pending (or dead).
	n, dead, err := s.pending(ctx)
	row = Row{Invariant: "nothing left pending, retrying or dead", Checked: fmt.Sprintf("%d pending or retrying, %d dead", n, dead), Violations: n + dead}
	if err != nil {
		row.Checked, row.Violations = "error: "+err.Error(), 1
	}
	rep.Rows = append(rep.Rows, row)

	// 8. Partition stall after each kill or pause.
	rep.Stalls = s.stalls(ctx, in)
}

func countAfter(samples []sample, closedAt map[int]time.Time) int {
	n := 0
	for _, smp := range samples {
		if at, ok := closedAt[smp.sub]; ok && smp.at.After(at) {
			n++
		}
	}
	return n
}

func (s *system) checkVersions(ctx context.Context) Row {
	row := Row{Invariant: "applied versions never go backwards in projection_history"}
	rows, err := s.pool.Query(ctx, `
SELECT provider, source_account, environment, resource_type, resource_id, provider_version
FROM projection_history
WHERE outcome IN ('applied', 'fetched') AND provider_version IS NOT NULL
ORDER BY provider, source_account, environment, resource_type, resource_id, id`)
	if err != nil {
		row.Checked, row.Violations = "error: "+err.Error(), 1
		return row
	}
	var r, prev message.Resource
	var v, prevV int64
	n, resources := 0, 0
	_, err = pgx.ForEachRow(rows, []any{&r.Provider, &r.SourceAccount, &r.Environment, &r.Type, &r.ID, &v}, func() error {
		n++
		if r != prev {
			resources++
			prev, prevV = r, v
			return nil
		}
		if v < prevV {
			row.Violations++
			row.Resources = append(row.Resources, r)
		}
		prevV = v
		return nil
	})
	if err != nil {
		row.Checked, row.Violations = "error: "+err.Error(), 1
		return row
	}
	row.Checked = fmt.Sprintf("%d writes with a version on %d resources", n, resources)
	row.Resources = firstFew(row.Resources)
	return row
}

func (s *system) checkInvoices(ctx context.Context, p plan) Row {
	row := Row{Invariant: "every paid invoice recorded exactly once"}
	want := map[string]sub{}
	for _, sb := range p.subs {
		for _, st := range sb.steps {
			if st.invoice != "" {
				want[st.invoice] = sb
			}
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT fact_id, count(*) FROM fact WHERE fact_type = 'invoice_paid' GROUP BY fact_id`)
	if err != nil {
		row.Checked, row.Violations = "error: "+err.Error(), 1
		return row
	}
	got := map[string]int{}
	var id string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { got[id] = n; return nil }); err != nil {
		row.Checked, row.Violations = "error: "+err.Error(), 1
		return row
	}
	missing, extra := 0, 0
	for inv, sb := range want {
		if got[inv] != 1 {
			missing++
			row.Resources = append(row.Resources, s.resource(sb))
		}
	}
	for inv := range got {
		if _, ok := want[inv]; !ok {
			extra++
		}
	}
	row.Violations = missing + extra
	row.Checked = fmt.Sprintf("%d invoices paid, %d recorded, %d missing, %d unknown", len(want), len(got), missing, extra)
	row.Resources = firstFew(row.Resources)
	return row
}

func (s *system) checkAcked(ctx context.Context, tr *traffic) Row {
	row := Row{Invariant: "no 2xx whose rows are not in the inbox"}
	rows, err := s.pool.Query(ctx, `SELECT event_id FROM webhook_inbox WHERE environment = $1`, environmentName)
	if err != nil {
		row.Checked, row.Violations = "error: "+err.Error(), 1
		return row
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		row.Checked, row.Violations = "error: "+err.Error(), 1
		return row
	}
	in := map[string]bool{}
	for _, id := range have {
		in[id] = true
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for id := range tr.acked {
		if !in[id] {
			row.Violations++
		}
	}
	row.Checked = fmt.Sprintf("%d events answered 2xx (%d accepted, %d duplicate answers), %d deliveries, %d retried after a non-2xx",
		len(tr.acked), tr.answers["accepted"], tr.answers["duplicate"], tr.deliveries, tr.retries)
	return row
}

// stalls measures, per processor fault, the longest time one of the
// processor's partitions went without a processed event.
func (s *system) stalls(ctx context.Context, in *injector) []Stall {
	in.mu.Lock()
	var firstAfter []hit
	for _, h := range in.hits {
		if h.kind == faultKillProcessor || h.kind == faultPauseProcessor {
			firstAfter = append(firstAfter, *h)
		}
	}
	in.mu.Unlock()
	if len(firstAfter) == 0 {
		return nil
	}
	rows, err := s.pool.Query(ctx, `
SELECT provider, source_account, environment, resource_type, resource_id, processed_at
FROM webhook_inbox WHERE processed_at IS NOT NULL AND processed_at > $1`, firstAfter[0].started)
	if err != nil {
		return nil
	}
	part := kgo.StickyKeyPartitioner(nil).ForTopic(s.topic)
	type done struct {
		part int32
		at   time.Time
	}
	var all []done
	var r message.Resource
	var at time.Time
	_, _ = pgx.ForEachRow(rows, []any{&r.Provider, &r.SourceAccount, &r.Environment, &r.Type, &r.ID, &at}, func() error {
		p := part.Partition(&kgo.Record{Key: []byte(r.Key())}, int(s.cfg.Partitions))
		all = append(all, done{part: int32(p), at: at})
		return nil
	})
	var out []Stall
	for _, h := range firstAfter {
		st := Stall{Fault: h.kind, Detail: h.detail, Partitions: len(h.partitions), Took: -1, Moved: h.moved}
		for _, p := range h.partitions {
			var first time.Time
			for _, d := range all {
				if d.part == p && d.at.After(h.started) && (first.IsZero() || d.at.Before(first)) {
					first = d.at
				}
			}
			if !first.IsZero() {
				st.Took = max(st.Took, first.Sub(h.started))
			}
		}
		out = append(out, st)
	}
	return out
}

func (r Report) print(out io.Writer) {
	fmt.Fprintf(out, "\nseed %d (schedule %s): %d subscriptions, %d events, %d deliveries, %d faults; ran %s, settled %s after the traffic\n\n",
		r.Seed, r.Digest, r.Subscriptions, r.Events, r.Deliveries, r.Faults, r.TrafficTook.Round(time.Second), r.QuiesceTook.Round(100*time.Millisecond))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tINVARIANT\tCHECKED")
	for _, row := range r.Rows {
		res := "ok"
		if row.Violations > 0 {
			res = fmt.Sprintf("FAIL (%d)", row.Violations)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", res, row.Invariant, row.Checked)
	}
	if len(r.Exited) > 0 {
		fmt.Fprintf(tw, "FAIL\tno service exits on its own\t%s\n", strings.Join(r.Exited, ", "))
	}
	for _, st := range r.Stalls {
		took := "no traffic on its partitions afterwards"
		if st.Took >= 0 {
			took = st.Took.Round(10 * time.Millisecond).String()
		}
		moved := "not seen"
		if st.Moved > 0 {
			moved = st.Moved.Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(tw, "%s\tpartition stall after %s\t%s; first event applied on each of them within %s, all re-fenced by another member after %s\n",
			took, st.Fault, st.Detail, took, moved)
	}
	_ = tw.Flush()
}

// explainViolations prints the timeline of each broken resource.
func (s *system) explainViolations(ctx context.Context, r Report, out io.Writer) {
	seen := map[message.Resource]bool{}
	for _, row := range r.Rows {
		for _, res := range row.Resources {
			if seen[res] {
				continue
			}
			seen[res] = true
			var t explain.Timeline
			if err := s.opsGet(ctx, fmt.Sprintf("/v1/explain/%s/%s/%s/%s/%s", res.Provider, res.SourceAccount, res.Environment, res.Type, res.ID), &t); err != nil {
				fmt.Fprintf(out, "\nexplain %s: %v\n", res.Key(), err)
				continue
			}
			fmt.Fprintf(out, "\n%s — %s\n", row.Invariant, res.Key())
			_ = t.WriteText(out)
		}
	}
}

func (s *system) opsGet(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.opsURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.opsToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
