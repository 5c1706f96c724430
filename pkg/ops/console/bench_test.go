package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/pkg/ops/console"
	"github.com/hookyard/hookyard/pkg/ops/job"
)

// BenchmarkConsolePagesOnAMillionInboxRows times each page, as a logged-in
// operator's browser asks for it, on an inbox of one million rows (and as
// many outbox and history rows, 100,000 projections) that were never
// analyzed, as a fresh database has them. Every page answers within 200 ms
// by design (each reads a bounded part of an index); the report is ns/op
// and ms/op per page:
//
//	go test -run '^$' -bench ConsolePages -benchtime 20x ./pkg/ops/console/
func BenchmarkConsolePagesOnAMillionInboxRows(b *testing.B) {
	const rows = 1_000_000
	s := dbtest.New(b)
	plantest.LoadRows(b, s.Pool, rows)
	// The load leaves gigabytes of dirty pages; flush them now, so the
	// timings are the pages' and not the checkpointer's.
	_, err := s.Pool.Exec(b.Context(), `CHECKPOINT`)
	require.NoError(b, err)
	e := health.NewEcho()
	jobs := job.New(s.Pool, slog(b), job.Config{Steps: map[string]job.Step{}})
	_, err = console.Mount(e, s.Pool, slog(b), console.Config{Auth: console.TokenAuthenticator{Token: opsToken}, Jobs: jobs,
		Topic:  plantest.Topic,
		Scopes: []console.Scope{{Provider: plantest.Provider, SourceAccount: plantest.Account, Environment: plantest.Environment}}})
	require.NoError(b, err)
	srv := httptest.NewServer(e)
	b.Cleanup(srv.Close)
	c := client(b)
	login(b, c, srv.URL, opsToken)
	res := fmt.Sprintf("/console/resource/%s/%s/%s/subscription/sub_4242", plantest.Provider, plantest.Account, plantest.Environment)
	for _, p := range []struct{ name, path string }{
		{"overview", "/console/"},
		{"pending", "/console/pending"},
		{"pending filtered, no match", "/console/pending?type=no.such.type"},
		{"retrying", "/console/retrying?provider=" + plantest.Provider},
		{"retrying next page", "/console/retrying?after=2000-01-01T00:00:00Z"},
		{"dead", "/console/dead?provider=" + plantest.Provider},
		{"dead next page", "/console/dead?after=2000-01-01T00:00:00Z"},
		{"dead filtered, no match", "/console/dead?type=no.such.type"},
		{"replay estimate", "/console/dead/replay?provider=" + plantest.Provider + "&type=subscription_changed"},
		{"search event", "/console/search?q=ev_424299"},
		{"search resource", "/console/search?q=sub_4242"},
		{"event", fmt.Sprintf("/console/event/%s/%s/%s/ev_424299", plantest.Provider, plantest.Account, plantest.Environment)},
		{"resource", res},
		{"parked", "/console/parked"},
		{"actions", "/console/actions?status=pending"},
		{"jobs", "/console/jobs"},
		{"partitions", "/console/partitions"},
	} {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				code, _ := get(b, c, srv.URL+p.path)
				if code != http.StatusOK && code != http.StatusSeeOther {
					b.Fatalf("%s answered %d", p.path, code)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}
