package partition_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/partition"
)

func at(s string) *time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return &t
}

// New partitions cover now and what is ahead, aligned to the interval,
// and start where an existing partition of another width ends (the
// migration's first one, a legacy table attached up to its cutover):
// never overlapping one, never leaving a gap. Minute-wide ones cover at
// least partition.AheadMin.
func TestPlanCoversAheadWithoutOverlapOrGap(t *testing.T) {
	t.Parallel()
	now := *at("2026-12-01T17:30:20Z")

	got := partition.Plan(nil, 24*time.Hour, now)
	require.Len(t, got, 5)
	require.Equal(t, *at("2026-12-01T00:00:00Z"), got[0][0])
	for i := 1; i < len(got); i++ {
		require.Equal(t, got[i-1][1], got[i][0], "no gap")
	}

	legacy := []partition.Partition{{Name: "h_legacy", To: at("2026-12-03T00:00:00Z")}}
	got = partition.Plan(legacy, 24*time.Hour, now)
	require.Equal(t, *at("2026-12-03T00:00:00Z"), got[0][0], "starts at the legacy partition's end")

	first := []partition.Partition{{Name: "b_first", From: at("2026-12-01T00:00:00Z"), To: at("2026-12-01T17:30:00Z")}}
	got = partition.Plan(first, time.Minute, now)
	require.Equal(t, *at("2026-12-01T17:30:00Z"), got[0][0])
	require.Equal(t, *at("2026-12-01T17:31:00Z"), got[0][1])
	require.GreaterOrEqual(t, got[len(got)-1][1].Sub(now), partition.AheadMin)

	// An existing partition ahead splits the new range instead of overlapping it.
	ahead := []partition.Partition{{Name: "odd", From: at("2026-12-02T06:00:00Z"), To: at("2026-12-02T07:00:00Z")}}
	got = partition.Plan(ahead, 24*time.Hour, now)
	require.Equal(t, [2]time.Time{*at("2026-12-02T00:00:00Z"), *at("2026-12-02T06:00:00Z")}, got[1])
	require.Equal(t, [2]time.Time{*at("2026-12-02T07:00:00Z"), *at("2026-12-03T00:00:00Z")}, got[2])

	require.Equal(t, "webhook_inbox_body_p20261201t1730_20261201t1731",
		partition.Name("webhook_inbox_body", *at("2026-12-01T17:30:00Z"), *at("2026-12-01T17:31:00Z")))
	require.Error(t, partition.Validate(90*time.Second))
	require.NoError(t, partition.Validate(time.Minute))
}
