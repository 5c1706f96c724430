package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOnlyDevStartsADatabaseAndOnlyWhenNoneIsConfiguredOrAnswering(t *testing.T) {
	t.Parallel()
	probed := 0
	nothingAnswers := func() bool { probed++; return false }
	for _, cmd := range []string{
		"receiver", "outbox-relay", "processor", "reconciler", "api",
		"migrate", "events", "explain", "replay", "purge", "fence", "dead",
	} {
		require.False(t, startsDatabase(cmd, false, nothingAnswers), "%s must never start a database", cmd)
	}
	require.Zero(t, probed, "services do not even probe for a database to replace")

	require.True(t, startsDatabase("dev", false, nothingAnswers))
	require.False(t, startsDatabase("dev", true, nothingAnswers), "DATABASE_URL set: use it, up or not")
	require.False(t, startsDatabase("dev", false, func() bool { return true }), "a server answers on the default address: use it")
}
