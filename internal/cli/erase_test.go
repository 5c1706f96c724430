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

	var out api.Erased
	e.runJSON(&out, "erase", "-account", "acct_a", "-provider", "stripe", "-environment", "live")
	require.Zero(t, out.Total, "another environment: nothing")
	e.runJSON(&out, "erase", "-account", "acct_a", "-resource", "sub_9,sub_1", "-provider", "stripe")
	require.EqualValues(t, 3, out.Rows["webhook_inbox"], "the three events of acct_a: %v", out.Rows)
	require.Equal(t, []string{"sub_9", "sub_1"}, out.Request.Resources)

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
