package metrics

import (
	"testing"

	"github.com/hookyard/hookyard/internal/plantest"
	"github.com/hookyard/hookyard/pkg/dbtest"
)

// Every scrape counts the unfinished events through the partial index of
// each status only, whatever the statistics: the gauges must stay cheap on
// an inbox of millions, exactly when someone is watching them.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "inbox backlog gauges", SQL: backlogSQL,
			Reads: []string{"webhook_inbox_dead", "webhook_inbox_pending", "webhook_inbox_retry_due"}},
	})
}
