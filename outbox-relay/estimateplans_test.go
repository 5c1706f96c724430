package outboxrelay

import (
	"testing"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The console's outbox backlog reads the primary key only, a bounded part of
// it, whatever the statistics: a count by sequential scan would read every
// waiting row on each page view, most exactly when the backlog is largest.
func TestConsoleBacklogReadsOnlyThePrimaryKeyWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "bounded outbox backlog", SQL: backlogBoundSQL, Args: []any{10_001},
			Reads: []string{"outbox_pkey"}},
	})
}
