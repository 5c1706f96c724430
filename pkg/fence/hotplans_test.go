package fence

import (
	"testing"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/plantest"
)

// The fence check runs in every write transaction of the processor; it reads
// its partition's row by the primary key, whatever the statistics.
func TestHotStatementsUseTheirIndexWithOrWithoutStatistics(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	plantest.Run(t, s.Pool, []plantest.Case{
		{Name: "check the fence", SQL: checkSQL, Args: []any{plantest.Topic, int32(3)},
			Reads: []string{"partition_fence_pkey"}, SmallTables: []string{"partition_fence"}},
	})
}
