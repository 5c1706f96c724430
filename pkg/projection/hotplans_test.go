package projection

import (
	"testing"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The processor's projection writes find the resource by the projection's
// primary key, whatever the statistics, and the history is only appended to.
// Republishing walks the primary key from where the last batch ended.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	res := []any{plantest.Provider, plantest.Account, plantest.Environment, "subscription", plantest.ResourceID(85)}
	texts := func(v string) []string { return []string{v, v} }
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "versioned write", SQL: versionedSQL,
			Args:  append(res, int64(1_000_000), `{"status":"active"}`, "active", false, "ev_85", int64(1), true),
			Reads: []string{"projection_pkey"}},
		{Name: "fetched write", SQL: fetchedSQL,
			Args:  append(res, `{"status":"canceled"}`, "canceled", false, "ev_85", int64(1), "2026-01-01T00:00:00Z", int64(7)),
			Reads: []string{"projection_pkey"}},
		{Name: "versioned write, change stream off", SQL: versionedPlainSQL,
			Args:  append(res, int64(1_000_000), `{"status":"active"}`, "active", false, "ev_85", int64(1), true),
			Reads: []string{"projection_pkey"}},
		{Name: "fetched write, change stream off", SQL: fetchedPlainSQL,
			Args:  append(res, `{"status":"canceled"}`, "canceled", false, "ev_85", int64(1), "2026-01-01T00:00:00Z", int64(7)),
			Reads: []string{"projection_pkey"}},
		{Name: "queue change records", SQL: changesSQL,
			Args:  []any{texts("chargebee/dev-site/test/subscription/sub_85"), texts(`{}`), "hookyard.changes"},
			Reads: []string{}},
		{Name: "republish projections", SQL: republishSQL,
			Args:  []any{plantest.Provider, plantest.Account, plantest.Environment, "subscription", plantest.ResourceID(85), 1000, "hookyard.changes"},
			Reads: []string{"projection_pkey"}},
		{Name: "append history", SQL: historySQL,
			Args: []any{texts(plantest.Provider), texts(plantest.Account), texts(plantest.Environment), texts("subscription"),
				texts("sub_1"), texts("ev_1"), texts(Applied), []*int64{nil, nil}, texts("active"), []int64{1, 1}, texts(""),
				[]*string{nil, nil}, []bool{false, false}},
			Reads: []string{}},
		{Name: "load listed states", SQL: loadListedSQL,
			Args: []any{texts(plantest.Provider), texts(plantest.Account), texts(plantest.Environment), texts("subscription"),
				[]string{"sub_1", "sub_2"}, []int64{7, 8}},
			Reads: []string{"reconcile_listed_pkey"}},
		{Name: "delete listed states", SQL: deleteListedSQL, Args: append(res, int64(7)),
			Reads: []string{"reconcile_listed_pkey"}},
		{Name: "refresh checks", SQL: refreshSQL,
			Args: []any{texts(plantest.Provider), texts(plantest.Account), texts(plantest.Environment), texts("subscription"),
				[]string{"sub_1", "sub_2"}, texts("ev_1")},
			Reads: []string{}},
	})
}
