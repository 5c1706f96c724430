package action

import (
	"regexp"
	"testing"

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
