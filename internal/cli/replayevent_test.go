package cli_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/inbox"
)

// `replay event` of an event the retention purge emptied says so: the
// report names the reason (purged) and the exit code is not success, as a
// partition replay reports its purged events. Fails if it prints a bare
// {"replayed":0} and exits 0.
func TestReplayEventOfAPurgedEventSaysPurged(t *testing.T) {
	e := newCLIEnv(t, nil)
	e.seed()
	_, err := e.schema.Pool.Exec(e.t.Context(), `UPDATE webhook_inbox SET payload = NULL, raw_body = NULL, body_at = NULL WHERE event_id = 'evt_ok'`)
	require.NoError(t, err)

	code, stdout, stderr := e.run("replay", "event", "stripe", "acct_a", "test", "evt_ok")
	require.Equal(t, 1, code, stderr)
	var rep struct {
		Replayed int    `json:"replayed"`
		Skipped  string `json:"skipped"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	require.Zero(t, rep.Replayed)
	require.Equal(t, inbox.SkipPurged, rep.Skipped)
	require.Contains(t, stderr, "purged")
	require.Equal(t, inbox.StatusProcessed, e.status("evt_ok"))

	code, stdout, _ = e.run("replay", "event", "stripe", "acct_a", "test", "evt_nope")
	require.Equal(t, 1, code)
	require.NoError(t, json.Unmarshal([]byte(stdout), &rep), stdout)
	require.Equal(t, inbox.SkipNotInInbox, rep.Skipped)

	var ok map[string]any
	e.runJSON(&ok, "replay", "event", "stripe", "acct_a", "test", "evt_1")
	require.Equal(t, map[string]any{"replayed": float64(1)}, ok)
}
