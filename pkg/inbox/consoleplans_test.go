package inbox

import (
	"testing"
	"time"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The console's statements over the inbox answer on an inbox of millions
// as on an empty one, with or without statistics: the replay estimate
// reads the dead events only (webhook_inbox_dead), and a resource id
// searched across every provider, account and environment is one range of
// webhook_inbox_by_resource, never a walk of the inbox.
func TestConsoleInboxStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	count, countArgs := DeadFilter{Provider: plantest.Provider, EventType: "subscription_changed",
		Since: time.Now().Add(-24 * time.Hour)}.countSQL(100_000)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "estimate a replay by filter", SQL: count, Args: countArgs,
			Reads: []string{"webhook_inbox_dead"}},
		{Name: "find a resource by id", SQL: findResourceSQL, Args: []any{plantest.ResourceID(7), 20},
			Reads: []string{"webhook_inbox_by_resource"}},
	})
}
