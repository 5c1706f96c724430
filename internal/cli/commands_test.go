package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The usage text is generated from the command table, and each row's usage
// lines are written by hand: every line must name its own command, every
// command must be reachable by name, and only dev may run on the dev
// defaults. Fails if a row's usage drifts to another command, a name is
// listed twice, or a second command skips the production checks.
func TestCommandTableIsConsistentWithItsUsage(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range commands {
		require.False(t, seen[c.name], "%s listed twice", c.name)
		seen[c.name] = true
		got, ok := lookup(c.name)
		require.True(t, ok, c.name)
		require.Equal(t, c.name, got.name)
		require.NotNil(t, c.run, c.name)
		require.True(t, strings.HasSuffix(c.usage, "\n"), "%s: usage ends its line", c.name)
		for _, line := range strings.Split(strings.TrimSuffix(c.usage, "\n"), "\n") {
			if strings.HasPrefix(line, "  ") && line[2] != ' ' {
				require.True(t, strings.HasPrefix(line, "  "+c.name+" ") || line == "  "+c.name, "%s: usage line %q names another command", c.name, line)
			}
		}
		require.Contains(t, usage, c.usage)
		require.Equal(t, c.name == "dev", c.devDefaults, "%s: only dev runs on the dev defaults", c.name)
		if c.devDefaults {
			require.Equal(t, service, c.kind)
		}
	}
}
