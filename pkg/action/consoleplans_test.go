package action

import (
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// A resource's page (explain) reads the actions about it by their whole
// subject, whatever the statistics: each read of the primary key names the
// subject, never the account's range of it alone (every action of the
// account, matched against the resource's facts one by one).
func TestActionsOfAResourceAreReadBySubjectNeverByAccount(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	args := []any{plantest.Provider, plantest.Account, plantest.Environment, "subscription", plantest.ResourceID(42), 100}
	cases := []plantest.Case{{Name: "actions about a resource", SQL: forResourceSQL, Args: args,
		Reads: []string{"action_pkey", "fact_resource"}}}
	plantest.Load(t, s.Pool)
	bySubject(t, s, "no statistics", args)
	plantest.Check(t, s.Pool, false, cases)
	plantest.AnalyzeAtRest(t, s.Pool)
	bySubject(t, s, "analyzed at rest", args)
	plantest.Check(t, s.Pool, true, cases)
	plantest.Analyze(t, s.Pool)
	bySubject(t, s, "analyzed", args)
	plantest.Check(t, s.Pool, true, cases)
}

// The overview's open-action counts read action_unsent only, a bounded
// part of it, with or without statistics (never the whole action table,
// nor every open action), as the console runs them (consolePlanSQL set).
func TestOpenActionCountsReadOnlyTheUnsentIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	args := []any{1001, openStatuses}
	check := func(t *testing.T) {
		conn, err := s.Pool.Acquire(t.Context())
		require.NoError(t, err)
		defer conn.Release()
		_, err = conn.Exec(t.Context(), consolePlanSQL, pgx.QueryExecModeSimpleProtocol, false)
		require.NoError(t, err)
		defer func() { _, _ = conn.Exec(t.Context(), `RESET ALL`) }()
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			reads, plan := plantest.Reads(t, conn.Conn(), mode, openCappedSQL, args...)
			require.Equal(t, []string{"action_unsent"}, reads, "%s; plan:\n%s", mode, plan)
			require.NotContains(t, plan, "Bitmap", "%s; plan:\n%s", mode, plan)
		}
	}
	plantest.Load(t, s.Pool)
	t.Run("no statistics", check)
	plantest.AnalyzeAtRest(t, s.Pool)
	t.Run("analyzed at rest, then a backlog", check)
	plantest.Analyze(t, s.Pool)
	t.Run("analyzed in a backlog", check)
}

// Capped counts are exact below the cap and say when they stop at it.
func TestOpenActionCountsAreExactUpToTheCap(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	_, err := s.Pool.Exec(t.Context(), `INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status)
SELECT 'p', 'a', 'e', 'inv_' || g, CASE WHEN g <= 6 THEN 'receipt' ELSE 'other' END, 'ev_' || g,
       CASE WHEN g <= 4 THEN 'pending' WHEN g <= 6 THEN 'dead' WHEN g <= 8 THEN 'failed' ELSE 'sent' END
FROM generate_series(1, 10) g`)
	require.NoError(t, err)
	got, err := CountOpenCapped(t.Context(), s.Pool, 3)
	require.NoError(t, err)
	require.Equal(t, []OpenCapped{{Kind: "other", Status: "failed", Count: 2}, {Kind: "receipt", Status: "dead", Count: 2},
		{Kind: "receipt", Status: "pending", Count: 3, Capped: true}}, got)
}

var pkeyCond = regexp.MustCompile(`(?m)Index Scan(?: Backward)? using action_pkey on action.*\n\s+Index Cond: (.*)$`)

// bySubject asserts that every read of action_pkey in the statement's
// custom and generic plans names subject_id.
func bySubject(t *testing.T, s *dbtest.Schema, state string, args []any) {
	t.Helper()
	conn, err := s.Pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		_, plan := plantest.Reads(t, conn.Conn(), mode, forResourceSQL, args...)
		conds := pkeyCond.FindAllStringSubmatch(plan, -1)
		require.Len(t, conds, 2, "%s, %s: both branches read action_pkey; plan:\n%s", state, mode, plan)
		for _, c := range conds {
			require.Contains(t, c[1], "subject_id", "%s, %s: action_pkey read by subject; plan:\n%s", state, mode, plan)
		}
	}
}

// A resource's page reads the actions its observations caused (its
// transitions' effects, its changes' deliveries) through
// action_observation_subject by the subject's byte range, whatever the
// statistics: never the account's every action, nor every delivery of
// it. 100,000 deliveries and transition effects of 5,000 resources of one
// account beside the loaded receipts. Fails if the index or the range
// goes.
func TestActionsCausedByAResourceAreReadByTheirSubjectRange(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	args := []any{plantest.Provider, plantest.Account, plantest.Environment, "subscription/sub_42@", "subscription/sub_42A", 100}
	cases := []plantest.Case{{Name: "actions caused by a resource", SQL: causedSQL, Args: args,
		Reads: []string{"action_observation_subject"}}}
	plantest.Load(t, s.Pool)
	_, err := s.Pool.Exec(t.Context(), `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status, done_at, body, order_key, order_seq)
SELECT $1, $2, $3, 'subscription/sub_' || (g % 5000) || '@v' || g, CASE WHEN g % 4 = 0 THEN 'subscription_canceled' ELSE 'change:billing' END,
       'ev_' || g, 'sent', now(), '{}', CASE WHEN g % 4 <> 0 THEN 'subscription/sub_' || (g % 5000) END, g
FROM generate_series(1, 100000) g`, plantest.Provider, plantest.Account, plantest.Environment)
	require.NoError(t, err)
	byRange := func(t *testing.T) {
		conn, err := s.Pool.Acquire(t.Context())
		require.NoError(t, err)
		defer conn.Release()
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			_, plan := plantest.Reads(t, conn.Conn(), mode, causedSQL, args...)
			require.Regexp(t, `using action_observation_subject on action\s+Index Cond: \(.*subject_id.*>=.*subject_id.*<`, plan, mode)
		}
	}
	plantest.RequireNoStatistics(t, s.Pool)
	plantest.Check(t, s.Pool, false, cases)
	t.Run("no statistics, by range", byRange)
	_, err = s.Pool.Exec(t.Context(), `ANALYZE action`)
	require.NoError(t, err)
	plantest.Check(t, s.Pool, true, cases)
	t.Run("analyzed, by range", byRange)
}

// The actions caused by a resource are its subjects' only: not those of a
// resource whose id extends its id ("sub_1" and "sub_10"), nor of one
// whose id holds "@" after it ("sub_1@x"), nor a receipt.
func TestActionsCausedByAResourceAreItsOwnOnly(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	_, err := s.Pool.Exec(t.Context(), `
INSERT INTO action (provider, source_account, environment, subject_id, kind, event_id, status)
VALUES ('p', 'a', 'e', 'subscription/sub_1@v1', 'change:billing', 'e1', 'sent'),
       ('p', 'a', 'e', 'subscription/sub_1@f7', 'subscription_canceled', 'e2', 'pending'),
       ('p', 'a', 'e', 'subscription/sub_10@v1', 'change:billing', 'e3', 'sent'),
       ('p', 'a', 'e', 'subscription/sub_1@x@v1', 'change:billing', 'e4', 'sent'),
       ('p', 'a', 'e', 'subscription/sub_1@v2', 'change:billing', 'e5', 'sent'),
       ('p', 'a', 'x', 'subscription/sub_1@v3', 'change:billing', 'e6', 'sent'),
       ('p', 'a', 'e', 'sub_1', 'receipt', 'e7', 'sent')`)
	require.NoError(t, err)
	got, err := CausedBy(t.Context(), s.Pool, "p", "a", "e", "subscription", "sub_1", 10)
	require.NoError(t, err)
	var subjects []string
	for _, a := range got {
		subjects = append(subjects, a.SubjectID+" "+a.Kind)
	}
	require.ElementsMatch(t, []string{"subscription/sub_1@v1 change:billing", "subscription/sub_1@f7 subscription_canceled",
		"subscription/sub_1@v2 change:billing"}, subjects)
	got, err = CausedBy(t.Context(), s.Pool, "p", "a", "e", "subscription", "sub_1@x", 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "subscription/sub_1@x@v1", got[0].SubjectID)
}
