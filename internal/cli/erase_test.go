package cli_test

import (
	"os/user"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/ops/api"
)

// `hookyard erase` takes the account and its filters as the other ops
// commands take them, erases only what they select, prints the rows per
// table, and is audited as the OS user. Fails if the command erases
// without an account, ignores a filter, or is not recorded.
func TestEraseCommandErasesOnlyTheSelectedAccountAndIsAudited(t *testing.T) {
	e := newCLIEnv(t, nil)
	e.seed()
	code, _, stderr := e.run("erase", "-resource", "sub_1")
	require.Equal(t, 2, code, "no account: usage error")
	require.Contains(t, stderr, "erase -account A")

	_, err := e.schema.Pool.Exec(t.Context(), `INSERT INTO projection (provider, source_account, environment, resource_type, resource_id,
    provider_version, state, status, fence_generation) VALUES ('stripe', 'acct_a', 'test', 'subscription', 'sub_1', 3, '{"email":"a@example.com"}', 'active', 1)`)
	require.NoError(t, err)
	var out api.Erased
	e.runJSON(&out, "erase", "-account", "acct_a", "-provider", "stripe", "-environment", "live")
	require.Zero(t, out.Total, "another environment: nothing")
	e.runJSON(&out, "erase", "-account", "acct_a", "-resource", "sub_9,sub_1", "-provider", "stripe")
	require.EqualValues(t, 3, out.Rows["webhook_inbox"], "the three events of acct_a: %v", out.Rows)
	require.Equal(t, []string{"sub_9", "sub_1"}, out.Request.Resources)
	require.EqualValues(t, 1, out.Changes, "the erased projection's change record, queued for the changes topic")
	var topic, msg string
	require.NoError(t, e.schema.Pool.QueryRow(t.Context(),
		`SELECT topic, message FROM outbox WHERE message_key = 'stripe/acct_a/test/subscription/sub_1'`).Scan(&topic, &msg))
	require.Equal(t, "hookyard.changes", topic)
	require.NotContains(t, msg, "a@example.com")

	var left int
	require.NoError(t, e.schema.Pool.QueryRow(t.Context(),
		`SELECT count(*) FROM webhook_inbox WHERE body_at IS NOT NULL AND source_account = 'site_b'`).Scan(&left))
	require.Equal(t, 1, left, "another account keeps its events")
	u, err := user.Current()
	require.NoError(t, err)
	var actor string
	var rows int64
	require.NoError(t, e.schema.Pool.QueryRow(t.Context(),
		`SELECT actor, rows FROM ops_audit WHERE action = 'erase' ORDER BY id DESC LIMIT 1`).Scan(&actor, &rows))
	require.Equal(t, "cli:"+u.Username, actor)
	require.Equal(t, out.Total, rows)
}
