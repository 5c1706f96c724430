//go:build unix

package devpg

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFolderEntryFollowsOwnerThenGroupThenOthersBits(t *testing.T) {
	t.Parallel()
	a := &account{name: "postgres", uid: 101, gid: 104, groups: []uint32{104, 110}}
	for _, tc := range []struct {
		mode     fs.FileMode
		uid, gid uint32
		want     bool
	}{
		{0o700, 0, 0, false},     // /root
		{0o755, 0, 0, true},      // /var/lib
		{0o700, 101, 104, true},  // its own data folder
		{0o007, 101, 104, false}, // owner bits decide for the owner
		{0o750, 0, 110, true},    // a supplementary group
		{0o705, 0, 110, false},   // group bits decide for a member
	} {
		require.Equal(t, tc.want, a.canEnter(tc.mode, tc.uid, tc.gid), "mode %v uid %d gid %d", tc.mode, tc.uid, tc.gid)
	}
}

func TestFolderClosedToTheServerUserIsNamedBeforeStarting(t *testing.T) {
	t.Parallel()
	closed := filepath.Join(t.TempDir(), "closed")
	require.NoError(t, os.MkdirAll(filepath.Join(closed, "data"), 0o755))
	require.NoError(t, os.Chmod(closed, 0o700))
	stranger := &account{name: "stranger", uid: 54321, gid: 54321, groups: []uint32{54321}}

	err := stranger.reachable(filepath.Join(closed, "data"))
	require.ErrorIs(t, err, ErrUnreachable)
	require.Contains(t, err.Error(), closed)

	require.NoError(t, os.Chmod(closed, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(closed), 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(filepath.Dir(closed)), 0o755))
	require.NoError(t, stranger.reachable(filepath.Join(closed, "data")))
}
