package cli_test

import (
	"encoding/json"
	"os/user"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// The CLI reads the database directly, with no token, so its payload reads
// and its changes are recorded as cli:<OS user>, with the command's
// arguments and the rows; `hookyard audit` lists the records newest first.
func TestCLIOperationsAreAuditedAsTheOSUser(t *testing.T) {
	e := newCLIEnv(t, nil)
	e.seed()
	var out map[string]any
	e.runJSON(&out, "dead", "show", "stripe", "acct_a", "test", "evt_2", "-payload")
	e.runJSON(&out, "dead", "show", "stripe", "acct_a", "test", "evt_2") // no payload: not recorded
	e.runJSON(&out, "dead", "replay", "stripe", "acct_a", "test", "evt_1")
	e.runJSON(&out, "dead", "replay", "-provider", "stripe")
	e.runJSON(&out, "replay", "event", "stripe", "acct_a", "test", "evt_ok")
	e.runJSON(&out, "replay", "dead", "-since", "1h")
	e.runJSON(&out, "replay", "resource", "stripe", "acct_a", "test", "subscription", "sub_1")
	e.runJSON(&out, "actions", "replay", "-kind", "receipt")
	e.runJSON(&out, "purge", "-older-than", "2h")
	code, _, _ := e.run("dead", "replay", "stripe", "acct_a", "test", "evt_nope")
	require.Equal(t, 1, code, "a refused operation is not recorded")

	u, err := user.Current()
	require.NoError(t, err)
	var got struct {
		Audit []audit.Entry `json:"audit"`
		Count int           `json:"count"`
	}
	e.runJSON(&got, "audit", "-since", "1h", "-limit", "50")
	type rec struct {
		action string
		rows   int64
	}
	var recs []rec
	for _, a := range got.Audit {
		require.Equal(t, "cli:"+u.Username, a.Actor)
		recs = append(recs, rec{a.Action, a.Rows})
	}
	require.Equal(t, []rec{
		{audit.ActionPurge, 0}, {audit.ActionReplayAction, 0}, {audit.ActionReplayResource, 3},
		{audit.ActionReplayDead, 1}, {audit.ActionReplayEvent, 1}, {audit.ActionReplayDead, 1},
		{audit.ActionReplayDead, 1}, {audit.ActionPayloadRead, 1},
	}, recs)
	require.JSONEq(t, `{"command": "dead replay", "args": ["-provider", "stripe"]}`, string(got.Audit[5].Target))

	e.runJSON(&got, "audit", "-limit", "1")
	require.Equal(t, 1, got.Count)
	e.runJSON(&got, "audit", "-since", time.Now().Add(time.Minute).Format(time.RFC3339))
	require.Zero(t, got.Count)
	code, _, stderr := e.run("audit", "-limit", "0")
	require.Equal(t, 2, code, stderr)
}

// A purge below retention.min_purge_age is a usage error (exit 2) and
// purges nothing; -dry-run prints what it would touch and changes nothing.
func TestPurgeCommandHasAFloorAndADryRun(t *testing.T) {
	e := newCLIEnv(t, nil)
	e.seed()
	// Rows received before bodies moved to partitions (migration 00021):
	// purge empties their legacy columns; bodies in partitions go with
	// their partition (hookyard retention).
	_, err := e.schema.Pool.Exec(t.Context(), `UPDATE webhook_inbox w SET payload = convert_from(b.body, 'UTF8')::jsonb, body_at = NULL
FROM webhook_inbox_body b WHERE b.provider = w.provider AND b.source_account = w.source_account
  AND b.environment = w.environment AND b.event_id = w.event_id AND b.stored_at = w.body_at`)
	require.NoError(t, err)
	_, err = e.schema.Pool.Exec(t.Context(), `UPDATE webhook_inbox SET received_at = now() - interval '3 hours' WHERE event_id = 'evt_ok'`)
	require.NoError(t, err)
	payloads := func() (n int) {
		require.NoError(t, e.schema.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_inbox WHERE payload IS NOT NULL`).Scan(&n))
		return n
	}
	before := payloads()
	for _, older := range []string{"1ns", "59m"} {
		code, _, stderr := e.run("purge", "-older-than", older)
		require.Equal(t, 2, code, older)
		require.Contains(t, stderr, "retention.min_purge_age", older)
	}
	require.Equal(t, before, payloads())

	var dry struct {
		DryRun bool      `json:"dry_run"`
		Rows   int64     `json:"rows"`
		Oldest time.Time `json:"oldest_received_at"`
		Newest time.Time `json:"newest_received_at"`
	}
	e.runJSON(&dry, "purge", "-older-than", "2h", "-dry-run")
	require.True(t, dry.DryRun)
	require.EqualValues(t, 1, dry.Rows)
	require.WithinDuration(t, time.Now().Add(-3*time.Hour), dry.Oldest, time.Minute)
	require.Equal(t, before, payloads(), "a dry run changes nothing")
	var purged struct {
		Purged int64 `json:"purged"`
	}
	e.runJSON(&purged, "purge", "-older-than", "2h")
	require.EqualValues(t, 1, purged.Purged)
	require.Equal(t, before-1, payloads())
}

// `hookyard retention` runs one pass: it prints the partitions it created
// (none missing afterwards) and what it forgot, and is recorded in the
// audit as a purge.
func TestRetentionCommandPrintsWhatItChangedAndIsRecorded(t *testing.T) {
	e := newCLIEnv(t, nil)
	e.seed()
	var rep struct {
		Partitions []struct {
			Table, Partition string
			Dropped          bool
		} `json:"partitions"`
		Forgotten *int64 `json:"identities_forgotten"`
	}
	e.runJSON(&rep, "retention")
	require.NotNil(t, rep.Forgotten)
	var again struct {
		Partitions []json.RawMessage `json:"partitions"`
	}
	e.runJSON(&again, "retention")
	require.Empty(t, again.Partitions, "a second pass finds nothing to create or drop")
	var n int
	require.NoError(t, e.schema.Pool.QueryRow(t.Context(),
		`SELECT count(*) FROM ops_audit WHERE action = 'purge' AND target->>'command' = 'retention'`).Scan(&n))
	require.Equal(t, 2, n)
}
