package fact

import (
	"testing"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The processor records facts in every batch that has some; the insert
// reads nothing but its conflict arbiter, whatever the statistics.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	p, a, e, id := plantest.PendingKeys(1)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "record a fact", SQL: recordSQL, Args: []any{p[0], a[0], e[0], "invoice_paid", "inv_new", "subscription", "sub_1", id[0], `{}`},
			Reads: []string{}},
	})
}
