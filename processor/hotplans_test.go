package processor

import (
	"testing"
	"time"

	"github.com/hookyard/hookyard/internal/plantest"
	"github.com/hookyard/hookyard/pkg/dbtest"
)

// Without statistics (a fresh database, before autovacuum's first ANALYZE)
// the planner once looked batches up through webhook_inbox_resource, reading
// every row of the account for each key: 40 keys took 10 s at 54k rows, and
// the pipeline stopped as the inbox grew. Each statement the processor runs
// per batch must read the inbox by its primary key, whatever the statistics.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	p, a, e, id := plantest.PendingKeys(1000)
	n := len(id)
	status, outcome := repeat("processed", n), repeat("applied", n)
	lastErr, attempts, next := make([]*string, n), make([]int32, n), make([]*time.Time, n)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "load a batch's inbox rows", SQL: loadSQL, Args: []any{p, a, e, id},
			Reads: []string{"webhook_inbox_pkey"}},
		{Name: "mark a batch's events", SQL: markSQL, Args: []any{p, a, e, id, status, outcome, lastErr, attempts, next, make([]*time.Time, n), repeat("pending", n)},
			Reads: []string{"webhook_inbox_pkey"}},
		{Name: "record a fact", SQL: factSQL, Args: []any{p[0], a[0], e[0], "invoice_paid", "inv_new", "subscription", "sub_1", id[0], `{}`},
			Reads: []string{}},
		{Name: "record an action", SQL: actionSQL, Args: []any{p[0], a[0], e[0], "inv_new", "receipt", id[0], (*string)(nil)},
			Reads: []string{}},
		{Name: "mark a poison event dead", SQL: markDeadSQL, Args: []any{p[0], a[0], e[0], id[0], "rejected", []string{"pending"}},
			Reads: []string{"webhook_inbox_pkey"}},
	})
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}
