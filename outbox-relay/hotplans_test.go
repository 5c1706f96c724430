package outboxrelay

import (
	"testing"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// A claim reads the outbox by its primary key only, whatever the statistics:
// a plan that joins the claimed ids back with a hash over the whole outbox
// reads every waiting row for each batch, so the relay slows down exactly
// when the backlog is largest. A claimed change row asks whether an earlier
// row of its key waits elsewhere with one probe of outbox_topic_key, never
// a scan of the change rows.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "claim a batch", SQL: claimSQL, Args: []any{BatchSizeDefault},
			Reads: []string{"outbox_pkey", "outbox_topic_key"}},
	})
}
