package inbox

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The console's statements over the inbox answer on an inbox of millions
// as on an empty one, with or without statistics: the replay estimate
// reads the dead events only (webhook_inbox_dead), and a resource id
// searched across every provider, account and environment is one range of
// webhook_inbox_by_resource, never a walk of the inbox.
func TestConsoleInboxStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	count, countArgs := DeadFilter{Provider: plantest.Provider, EventType: "subscription_changed",
		Since: time.Now().Add(-24 * time.Hour)}.countSQL(100_000)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "estimate a replay by filter", SQL: count, Args: countArgs,
			Reads: []string{"webhook_inbox_dead"}},
		{Name: "find a resource by id", SQL: findResourceSQL, Args: []any{plantest.ResourceID(7), 20},
			Reads: []string{"webhook_inbox_by_resource"}},
	})
}

// orderedCase is a console statement that walks status indexes in their
// order: it reads exactly Reads, with index scans (never a bitmap scan,
// which fetches every row of the status before the LIMIT), and sorts no
// more than Sorts times (the list's one sort is of what it already read).
type orderedCase struct {
	plantest.Case
	Sorts int
}

// The overview's counts and the pending, retrying and dead lists read a
// bounded stretch of their status's partial index, in its order, with or
// without statistics, filtered or not: each page and each count costs the
// same on an inbox of millions as on an empty one.
func TestConsoleCountsAndListsWalkTheirStatusIndexInOrderWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	var cases []orderedCase
	cases = append(cases, orderedCase{Case: plantest.Case{Name: "capped backlog counts", SQL: cappedBacklogSQL, Args: []any{10_001},
		Reads: []string{"webhook_inbox_dead", "webhook_inbox_pending", "webhook_inbox_retry_due"}}})
	after := &Cursor{At: time.Now().Add(-time.Hour), Provider: plantest.Provider, SourceAccount: plantest.Account,
		Environment: plantest.Environment, EventID: plantest.EventID(85)}
	for status, index := range map[string]string{"pending": "webhook_inbox_pending", "retrying": "webhook_inbox_retry_due", "dead": "webhook_inbox_dead"} {
		for name, f := range map[string]ListFilter{
			"first page":                 {Status: status},
			"filtered by provider":       {Status: status, Provider: plantest.Provider},
			"filtered, since, next page": {Status: status, Provider: plantest.Provider, EventType: "nope", Since: time.Now().Add(-2 * time.Hour), After: after},
		} {
			sql, args, err := f.sql()
			require.NoError(t, err)
			cases = append(cases, orderedCase{Case: plantest.Case{Name: status + " list, " + name, SQL: sql, Args: args,
				Reads: []string{index}}, Sorts: 1})
		}
	}
	plantest.Load(t, s.Pool)
	t.Run("no statistics", func(t *testing.T) { checkOrdered(t, s, cases) })
	plantest.AnalyzeAtRest(t, s.Pool)
	t.Run("analyzed at rest, then a backlog", func(t *testing.T) { checkOrdered(t, s, cases) })
	plantest.Analyze(t, s.Pool)
	t.Run("analyzed in a backlog", func(t *testing.T) { checkOrdered(t, s, cases) })
}

// checkOrdered explains each case as the console runs it (consolePlanSQL
// set), custom and generic.
func checkOrdered(t *testing.T, s *dbtest.Schema, cases []orderedCase) {
	conn, err := s.Pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(t.Context(), consolePlanSQL, pgx.QueryExecModeSimpleProtocol, false) // for the session, as the console sets it for its transaction
	require.NoError(t, err)
	defer func() { _, _ = conn.Exec(t.Context(), `RESET ALL`) }()
	for _, c := range cases {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			t.Run(c.Name+"/"+mode, func(t *testing.T) {
				reads, plan := plantest.Reads(t, conn.Conn(), mode, c.SQL, c.Args...)
				require.True(t, slices.Equal(reads, c.Reads), "reads %q, not %q; plan:\n%s", reads, c.Reads, plan)
				require.NotContains(t, plan, "Bitmap", "plan:\n%s", plan)
				require.LessOrEqual(t, strings.Count(plan, "Sort Key"), c.Sorts, "plan:\n%s", plan)
			})
		}
	}
}
