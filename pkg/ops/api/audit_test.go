package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// Every operation that changes state is recorded in the request that did
// it: who (the token's name), what, which identity or filter, how many
// rows. GET /v1/audit lists the records with scope read.
func TestStateChangesAreAuditedWithWhoWhatAndHowMany(t *testing.T) {
	t.Parallel()
	srv, s := scopedServer(t)
	seedDeadEvents(t, s.Pool)
	seedActions(t, s.Pool)
	u := srv.URL
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, u+"/v1/dead/replay", "tok-operate",
		map[string]any{"provider": "stripe", "account": "acct_a", "environment": "test", "event_id": "evt_2"}, nil))
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, u+"/v1/dead/replay", "tok-operate",
		map[string]any{"account": "site_b"}, nil))
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, u+"/v1/replay/event/stripe/acct_a/test/evt_ok", token, nil, nil))
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, u+"/v1/replay/dead?since=72h", "tok-operate", nil, nil))
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, u+"/v1/replay/resource/stripe/acct_a/test/subscription/sub_2", "tok-operate", nil, nil))
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, u+"/v1/actions/replay", "tok-operate",
		map[string]any{"provider": "stripe", "account": "acct_a", "environment": "test", "subject": "in_dead", "kind": "receipt"}, nil))
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, u+"/v1/purge?older_than=720h", "tok-operate", nil, nil))
	// Refused operations change nothing and are not recorded.
	require.Equal(t, http.StatusConflict, send(t, http.MethodPost, u+"/v1/dead/replay", "tok-operate",
		map[string]any{"provider": "stripe", "account": "acct_a", "environment": "test", "event_id": "evt_ok"}, nil))

	var got struct {
		Audit []audit.Entry `json:"audit"`
		Count int           `json:"count"`
	}
	require.Equal(t, http.StatusForbidden, send(t, http.MethodGet, u+"/v1/audit", "tok-operate", nil, nil))
	require.Equal(t, http.StatusOK, send(t, http.MethodGet, u+"/v1/audit?since=1h&limit=100", "tok-read", nil, &got))
	require.Equal(t, 7, got.Count)
	type rec struct {
		actor, action, target string
		rows                  int64
	}
	// Newest first.
	want := []rec{
		{"oncall", audit.ActionPurge, `{"older_than": "720h0m0s", "job": 2}`, 0},
		{"oncall", audit.ActionReplayAction, `{"kind": "receipt", "account": "acct_a", "subject": "in_dead", "provider": "stripe", "environment": "test"}`, 1},
		{"oncall", audit.ActionReplayResource, `{"id": "sub_2", "type": "subscription", "account": "acct_a", "provider": "stripe", "environment": "test", "job": 1}`, 1},
		{"oncall", audit.ActionReplayDead, `{"since": "72h"}`, 1},
		{"OPS_TOKEN", audit.ActionReplayEvent, `{"account": "acct_a", "event_id": "evt_ok", "provider": "stripe", "environment": "test"}`, 1},
		{"oncall", audit.ActionReplayDead, `{"account": "site_b"}`, 1},
		{"oncall", audit.ActionReplayDead, `{"account": "acct_a", "event_id": "evt_2", "provider": "stripe", "environment": "test"}`, 1},
	}
	var recs []rec
	for _, e := range got.Audit {
		recs = append(recs, rec{e.Actor, e.Action, normalJSON(t, string(e.Target)), e.Rows})
	}
	for i := range want {
		want[i].target = normalJSON(t, want[i].target)
	}
	require.Equal(t, want, recs)

	require.Equal(t, http.StatusOK, send(t, http.MethodGet, u+"/v1/audit?limit=2", "tok-read", nil, &got))
	require.Equal(t, 2, got.Count)
	require.Equal(t, http.StatusBadRequest, send(t, http.MethodGet, u+"/v1/audit?since=soon", "tok-read", nil, nil))
}

// A purge has a floor: older_than under retention.min_purge_age (1h by
// default) is refused, 400 below_purge_floor, and nothing is purged.
// dry_run=true reports what the purge would touch (rows, oldest and
// newest received_at) and changes nothing.
func TestPurgeHasAFloorAndADryRun(t *testing.T) {
	t.Parallel()
	srv, s := scopedServer(t)
	seedDeadEvents(t, s.Pool)
	// Rows received before bodies moved to partitions (migration 00021):
	// the on-demand purge empties their legacy columns; bodies in
	// partitions go with their partition (hookyard retention).
	_, err := s.Pool.Exec(t.Context(), `UPDATE webhook_inbox w SET payload = convert_from(b.body, 'UTF8')::jsonb, body_at = NULL
FROM webhook_inbox_body b WHERE b.provider = w.provider AND b.source_account = w.source_account
  AND b.environment = w.environment AND b.event_id = w.event_id AND b.stored_at = w.body_at`)
	require.NoError(t, err)
	_, err = s.Pool.Exec(t.Context(), `UPDATE webhook_inbox SET status = 'processed', received_at = now() - interval '3 hours' WHERE event_id IN ('evt_1', 'evt_2')`)
	require.NoError(t, err)
	payloads := func() (n int) {
		require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_inbox WHERE payload IS NOT NULL`).Scan(&n))
		return n
	}
	before := payloads()
	for _, older := range []string{"1ns", "59m", "-1h"} {
		var body struct {
			Error struct{ Code, Message string }
		}
		require.Equal(t, http.StatusBadRequest, send(t, http.MethodPost, srv.URL+"/v1/purge?older_than="+older, "tok-operate", nil, &body), older)
		if older != "-1h" {
			require.Equal(t, "below_purge_floor", body.Error.Code, older)
			require.Contains(t, body.Error.Message, "min_purge_age", older)
		}
	}
	require.Equal(t, before, payloads())

	var dry struct {
		DryRun bool      `json:"dry_run"`
		Rows   int64     `json:"rows"`
		Oldest time.Time `json:"oldest_received_at"`
		Newest time.Time `json:"newest_received_at"`
	}
	require.Equal(t, http.StatusOK, send(t, http.MethodPost, srv.URL+"/v1/purge?older_than=2h&dry_run=true", "tok-operate", nil, &dry))
	require.True(t, dry.DryRun)
	require.EqualValues(t, 2, dry.Rows)
	require.WithinDuration(t, time.Now().Add(-3*time.Hour), dry.Oldest, time.Minute)
	require.WithinDuration(t, time.Now().Add(-3*time.Hour), dry.Newest, time.Minute)
	require.Equal(t, before, payloads(), "a dry run changes nothing")
	require.Equal(t, http.StatusAccepted, send(t, http.MethodPost, srv.URL+"/v1/purge?older_than=2h", "tok-operate", nil, nil))
	require.Equal(t, before-2, payloads())
}

// normalJSON is s re-encoded with sorted keys and no spaces.
func normalJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return string(mustJSON(t, v))
}
