package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
)

func TestPipelineDeliveryIsAnAuthenticChargebeeSnapshotVersionedBySendTime(t *testing.T) {
	t.Parallel()
	p := &pipeline{b: &bench{opts: options{pipeSubs: 7}},
		auth: "Basic " + base64.StdEncoding.EncodeToString([]byte("bench:s3cret"))}
	ep := &provider.Endpoint{ID: pipeEndpoint, Provider: provider.Chargebee, SourceAccount: pipeSite, Environment: "test",
		Secrets: []string{"bench:s3cret"}}
	before := time.Now().UnixMilli()
	r := p.delivery("m_")(12)
	after := time.Now().UnixMilli()
	h := http.Header{}
	h.Set(r.header, r.sig)
	ev, err := chargebee.Verifier{}.Verify(ep, h, r.body, time.Now())
	require.NoError(t, err)
	require.Equal(t, "m_12", ev.ID)
	require.Equal(t, "subscription", ev.ResourceType)
	require.Equal(t, "sub_5", ev.ResourceID, "event 12 of 7 subscriptions")
	require.NotNil(t, ev.Version)
	require.GreaterOrEqual(t, *ev.Version, before)
	require.LessOrEqual(t, *ev.Version, after)

	h.Set(r.header, "Basic "+base64.StdEncoding.EncodeToString([]byte("bench:wrong")))
	_, err = chargebee.Verifier{}.Verify(ep, h, r.body, time.Now())
	require.ErrorIs(t, err, provider.ErrUnauthenticated)
}

func TestPipelineDatabaseIsNeverTheBenchDatabaseItself(t *testing.T) {
	t.Parallel()
	u, name, err := pipelineDBURL("postgres://u:pw@db.example:5433/hookyard_bench?sslmode=disable")
	require.NoError(t, err)
	require.Equal(t, "hookyard_bench_pipeline", name)
	require.Equal(t, "postgres://u:pw@db.example:5433/hookyard_bench_pipeline?sslmode=disable", u)

	_, _, err = pipelineDBURL("postgres://u@db.example:5433?sslmode=disable")
	require.Error(t, err, "a URL without a database name must not make the section drop one")
}

func TestDevMetricsAreSummedOverTheirLabels(t *testing.T) {
	t.Parallel()
	text := `# HELP hookyard_processor_records_total x
# TYPE hookyard_processor_records_total counter
hookyard_processor_records_total 120
hookyard_outbox_batch_rows_sum 300
hookyard_outbox_batch_rows_count 20
hookyard_projection_outcomes_total{outcome="applied",provider="chargebee"} 5
hookyard_projection_outcomes_total{outcome="stale",provider="chargebee"} 2.5
hookyard_receiver_events_total{endpoint="a b",result="accepted"} 7 1700000000000
hookyard_weird NaN
`
	m, err := parseMetrics(strings.NewReader(text))
	require.NoError(t, err)
	require.Equal(t, 120.0, m["hookyard_processor_records_total"])
	require.Equal(t, 300.0, m["hookyard_outbox_batch_rows_sum"])
	require.Equal(t, 20.0, m["hookyard_outbox_batch_rows_count"])
	require.Equal(t, 7.5, m["hookyard_projection_outcomes_total"])
	require.Equal(t, 7.0, m["hookyard_receiver_events_total"], "a label value with a space and a timestamp after the value")
	require.NotContains(t, m, "hookyard_weird")
}

func TestARateHoldsOnlyWhenEveryEventIsProcessedWithinTheGoal(t *testing.T) {
	t.Parallel()
	good := pipeRun{Rate: 1000, AcceptRate: 990, HTTPErrors: "0", P99: 0.5, HTTPP99: 0.1}
	require.True(t, good.ok())
	for name, mut := range map[string]func(*pipeRun){
		"p99 over 1 s":          func(r *pipeRun) { r.P99 = 1.2 },
		"receiver answers late": func(r *pipeRun) { r.HTTPP99 = 1.5 },
		"events left pending":   func(r *pipeRun) { r.Pending = 1 },
		"deliveries failed":     func(r *pipeRun) { r.HTTPErrors = "3×HTTP 503" },
		"receiver fell behind":  func(r *pipeRun) { r.AcceptRate = 900 },
	} {
		r := good
		mut(&r)
		require.False(t, r.ok(), name)
	}
}

func TestResultsFileHoldsEveryPrintedTableTheFlagsAndTheMachine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := &bench{out: io.Discard, opts: options{args: []string{"-pipeline"}, flags: map[string]string{"pipeline-rate": "1000"}}}
	t1 := newTable("A. first", "measure", "value")
	t1.add("x", "1")
	t1.data = map[string]any{"p99_s": 0.05}
	b.emit(t1)
	t2 := newTable("D. second", "measure", "value")
	t2.note("a note")
	b.emit(t2)
	started := time.Date(2026, 11, 30, 16, 5, 7, 0, time.UTC)
	path, err := b.writeResults(context.Background(), dir, started, nil)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "2026-11-30T160507Z.json"), path, "RFC 3339 in UTC, without colons, sorts by time")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var got resultsFile
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Equal(t, []string{"-pipeline"}, got.Args)
	require.Equal(t, "1000", got.Flags["pipeline-rate"])
	require.Positive(t, got.Machine.CPUs)
	require.NotEmpty(t, got.Machine.GoVersion)
	require.Len(t, got.Sections, 2)
	require.Equal(t, "A. first", got.Sections[0].Title)
	require.Equal(t, [][]string{{"x", "1"}}, got.Sections[0].Rows)
	require.Equal(t, map[string]any{"p99_s": 0.05}, got.Sections[0].Data)
	require.Equal(t, []string{"a note"}, got.Sections[1].Notes)
}

func TestPgbenchCeilingRunsWithoutTheOutboxNotifyTriggerAndPutsItBack(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	b := &bench{pool: s.Pool}
	state := func() string {
		var st string
		require.NoError(t, s.Pool.QueryRow(context.Background(),
			`SELECT tgenabled::text FROM pg_trigger WHERE tgname = 'outbox_notify' AND tgrelid = 'outbox'::regclass`).Scan(&st))
		return st
	}
	require.Equal(t, "O", state(), "migrated: on")
	require.NoError(t, b.setNotifyTrigger(context.Background(), false))
	require.Equal(t, "D", state())
	require.NoError(t, b.setNotifyTrigger(context.Background(), true))
	require.Equal(t, "O", state())
}

func TestPgbenchCeilingWritesTheLedgerTheBodyAndTheOutboxAsIntakeDoes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	dir := t.TempDir()
	script := filepath.Join(dir, "receiver_tx.sql")
	require.NoError(t, os.WriteFile(script, []byte(pgbenchScript()), 0o600))
	url := dbtest.URL() + "&options=-csearch_path%3D" + s.Name
	out, err := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared", "-c", "1", "-t", "5", "-f", script, url).CombinedOutput()
	require.NoError(t, err, "%s", out)

	var ledger, joined, outbox int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox`).Scan(&ledger))
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&outbox))
	var body []byte
	require.NoError(t, s.Pool.QueryRow(ctx, `
SELECT count(*), (array_agg(b.body))[1] FROM webhook_inbox i
JOIN webhook_inbox_body b ON (b.provider, b.source_account, b.environment, b.event_id, b.stored_at) = (i.provider, i.source_account, i.environment, i.event_id, i.body_at)`).Scan(&joined, &body))
	require.Equal(t, 5, ledger)
	require.Equal(t, 5, joined, "every ledger row finds its body at stored_at = body_at")
	require.Equal(t, 5, outbox)
	require.True(t, json.Valid(body), "the body is the received bytes, not an escaped literal: %q", body)
	require.Contains(t, string(body), `"evt_bench"`)
}

func TestPreloadedAndPendingEventsFindTheirBodiesAsReadersJoinThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	ep := cbEndpoint
	_, err := s.Pool.Exec(ctx, preloadFinishedSQL, 100, ep.Provider, ep.SourceAccount, ep.Environment, ep.ID)
	require.NoError(t, err)
	v := int64(7)
	evs := []benchEvent{{id: "ev_1", resource: "sub_1", version: &v, payload: `{"id":"ev_1"}`}, {id: "ev_2", resource: "sub_2", version: &v, payload: `{"id":"ev_2"}`}}
	require.NoError(t, copyPending(ctx, s.Pool, ep, "subscription_changed", evs))

	var ledger, joined, legacy, valid int
	require.NoError(t, s.Pool.QueryRow(ctx, `
SELECT count(*), count(b.body), count(i.payload) + count(i.raw_body), count(*) FILTER (WHERE convert_from(b.body, 'UTF8')::jsonb ? 'id')
FROM webhook_inbox i
LEFT JOIN webhook_inbox_body b ON (b.provider, b.source_account, b.environment, b.event_id, b.stored_at) = (i.provider, i.source_account, i.environment, i.event_id, i.body_at)`).
		Scan(&ledger, &joined, &legacy, &valid))
	require.Equal(t, 102, ledger)
	require.Equal(t, 102, joined, "every ledger row finds its body at stored_at = body_at")
	require.Equal(t, 102, valid)
	require.Zero(t, legacy, "nothing in the legacy body columns")
	var pending int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'pending'`).Scan(&pending))
	require.Equal(t, 2, pending)
}

func TestAutovacuumStopsOnEveryLeafAndOlderLayoutsLackingATableStillRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := dbtest.New(t)
	require.NoError(t, stopAutovacuum(ctx, s.Pool, pipeTables))
	var on int
	require.NoError(t, s.Pool.QueryRow(ctx, `
SELECT count(*) FROM pg_partition_tree('webhook_inbox_body') t JOIN pg_class c ON c.oid = t.relid
WHERE t.isleaf AND NOT coalesce('autovacuum_enabled=false' = ANY(c.reloptions), false)`).Scan(&on))
	require.Zero(t, on, "every partition of the body table has autovacuum off")
	var leaves int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_partition_tree('webhook_inbox_body') WHERE isleaf`).Scan(&leaves))
	require.Positive(t, leaves)
	require.NoError(t, analyze(ctx, s.Pool, pipeTables))

	// The storage section's baseline schema has no body table.
	_, err := s.Pool.Exec(ctx, `DROP TABLE webhook_inbox_body`)
	require.NoError(t, err)
	require.NoError(t, stopAutovacuum(ctx, s.Pool, pipeTables))
	require.NoError(t, analyze(ctx, s.Pool, pipeTables))
}
