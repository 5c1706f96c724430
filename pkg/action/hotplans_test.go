package action

import (
	"testing"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The processor records actions in every batch that has some; the insert
// reads nothing but its conflict arbiter, whatever the statistics.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	p, a, e, id := plantest.PendingKeys(1)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "record an action", SQL: recordSQL, Args: []any{p[0], a[0], e[0], "inv_new", "receipt", id[0], (*string)(nil), (*string)(nil)},
			Reads: []string{}},
		{Name: "record a transition's action with its body", SQL: recordSQL, Args: []any{p[0], a[0], e[0], "subscription/sub_1@v3",
			"subscription_canceled", id[0], (*string)(nil), `{"to":"canceled"}`}, Reads: []string{}},
		{Name: "record a subscriber's change in its stream", SQL: recordOrderedSQL, Args: []any{p[0], a[0], e[0], "subscription/sub_1@v3",
			"change:billing", id[0], (*string)(nil), `{"status":"active"}`, "subscription/sub_1"}, Reads: []string{}},
	})
}
