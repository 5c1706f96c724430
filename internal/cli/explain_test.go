package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/cli"
	"github.com/hookyard/hookyard/internal/testkit/dbtest"
)

// explainCLI runs `hookyard explain ...` against a fresh test schema, the way
// an operator's shell does (DATABASE_URL with the schema's search_path). It
// sets the process environment, so its test does not run in parallel.
func explainCLI(t *testing.T) (*dbtest.Schema, func(args ...string) (int, string, string)) {
	t.Helper()
	s := dbtest.New(t)
	u, err := url.Parse(dbtest.URL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", s.Name)
	u.RawQuery = q.Encode()
	t.Setenv("DATABASE_URL", u.String())
	t.Setenv("LOG_LEVEL", "error")
	cfg := filepath.Join(t.TempDir(), "hookyard.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("endpoints: []\n"), 0o600))
	return s, func(args ...string) (int, string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		code := cli.Main(ctx, append([]string{"-config", cfg, "explain"}, args...), &out, &errOut)
		return code, out.String(), errOut.String()
	}
}

// `hookyard explain` prints the timeline as text by default and as JSON with
// -json; flags go before or after the resource; -limit keeps the latest
// entries; wrong arguments are a usage error. Fails if the command stops
// dispatching to the timeline or drops a flag.
func TestExplainCommandTextJSONAndLimit(t *testing.T) {
	s, run := explainCLI(t)
	ctx := context.Background()
	_, err := s.Pool.Exec(ctx, `
INSERT INTO webhook_inbox (provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id,
                           resource_version, payload, status, outcome, received_at, processed_at)
VALUES ('chargebee', 'site', 'live', 'ev_new', 'ep', 'subscription_cancelled', 'subscription', 'sub_1', 200,
        '{"id":"ev_new","occurred_at":1700000100}', 'processed', 'applied', now() - interval '2 minutes', now()),
       ('chargebee', 'site', 'live', 'ev_old', 'ep', 'subscription_activated', 'subscription', 'sub_1', 100,
        '{"id":"ev_old","occurred_at":1700000000}', 'processed', 'stale', now() - interval '1 minute', now())`)
	require.NoError(t, err)
	_, err = s.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id, provider_version, state, status, fence_generation, source_event_id)
VALUES ('chargebee', 'site', 'live', 'subscription', 'sub_1', 200, '{"id":"sub_1","status":"cancelled"}', 'cancelled', 1, 'ev_new')`)
	require.NoError(t, err)
	_, err = s.Pool.Exec(ctx, `
INSERT INTO projection_history (provider, source_account, environment, resource_type, resource_id, event_id, outcome,
                                provider_version, status, fence_generation, previous_status, deleted, recorded_at)
VALUES ('chargebee', 'site', 'live', 'subscription', 'sub_1', 'ev_new', 'applied', 200, 'cancelled', 1, 'active', false, now() - interval '110 seconds'),
       ('chargebee', 'site', 'live', 'subscription', 'sub_1', 'ev_old', 'stale', 100, 'active', 1, 'cancelled', false, now() - interval '50 seconds')`)
	require.NoError(t, err)

	code, out, errOut := run("chargebee", "site", "live", "subscription", "sub_1")
	require.Equal(t, 0, code, errOut)
	pos := 0
	for _, want := range []string{"cancelled · version 200 · from event ev_new", "no — canceled", "TIME (UTC)",
		"received", "ev_new", "provider time 2023-11-14 22:15:00.000", "applied", "active → cancelled",
		"received", "ev_old", "stale", "active is older than the projection (cancelled)"} {
		i := strings.Index(out[pos:], want)
		require.GreaterOrEqual(t, i, 0, "%q after offset %d in:\n%s", want, pos, out)
		pos += i + len(want)
	}

	code, out, errOut = run("-limit", "2", "chargebee", "site", "live", "subscription", "sub_1", "-json")
	require.Equal(t, 0, code, errOut)
	var tl struct {
		Key      string `json:"key"`
		Timeline []struct {
			Kind    string `json:"kind"`
			EventID string `json:"event_id"`
			Outcome string `json:"outcome"`
		} `json:"timeline"`
		Truncated bool `json:"truncated"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &tl), out)
	require.Equal(t, "chargebee/site/live/subscription/sub_1", tl.Key)
	require.True(t, tl.Truncated)
	require.Len(t, tl.Timeline, 2)
	require.Equal(t, "received", tl.Timeline[0].Kind)
	require.Equal(t, "ev_old", tl.Timeline[0].EventID)
	require.Equal(t, "stale", tl.Timeline[1].Outcome)

	code, _, errOut = run("chargebee", "site", "live")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "explain needs PROVIDER ACCOUNT ENV TYPE ID")
}
