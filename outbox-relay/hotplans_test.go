package outboxrelay

import (
	"testing"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// A claim reads the outbox by its primary key only, whatever the statistics:
// a plan that joins the claimed ids back with a hash over the whole outbox
// reads every waiting row for each batch, so the relay slows down exactly
// when the backlog is largest.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "claim a batch", SQL: claimSQL, Args: []any{BatchSizeDefault},
			Reads: []string{"outbox_pkey"}},
	})
}
