package processor_test

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/processor"
)

// A killed processor's partitions wait for the session timeout: the default
// is a stock broker's minimum (6 s), not franz-go's 45 s.
func TestKilledMemberIsDroppedAfterTheShortDefaultSessionTimeout(t *testing.T) {
	t.Parallel()
	cfg := processor.Config{}.WithDefaults()
	require.Equal(t, 6*time.Second, cfg.SessionTimeout)
	require.LessOrEqual(t, 3*cfg.HeartbeatInterval, cfg.SessionTimeout)
	require.Greater(t, cfg.RebalanceTimeout, cfg.RevokeGrace)
}

func TestSessionSettingsThatWouldDropHealthyMembersAreRefused(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, err := processor.New(nil, log, processor.Config{Brokers: []string{"x:1"}, SessionTimeout: 6 * time.Second, HeartbeatInterval: 3 * time.Second})
	require.ErrorContains(t, err, "HeartbeatInterval")
	_, err = processor.New(nil, log, processor.Config{Brokers: []string{"x:1"}, RevokeGrace: time.Minute})
	require.ErrorContains(t, err, "RebalanceTimeout")
	_, err = processor.New(nil, log, processor.Config{Brokers: []string{"x:1"}})
	require.NoError(t, err)
}
