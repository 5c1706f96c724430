package devpg

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/ulikunitz/xz"
)

// fakeJar writes a jar shaped like zonky's: a manifest and one .txz
// holding the given tar entries.
func fakeJar(t *testing.T, entries []*tar.Header, bodies map[string]string) string {
	t.Helper()
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	for _, e := range entries {
		// A copy: parallel subtests share their headers, and Size is set here.
		h := *e
		body := bodies[h.Name]
		h.Size = int64(len(body))
		require.NoError(t, tw.WriteHeader(&h))
		_, err := tw.Write([]byte(body))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	var txz bytes.Buffer
	xw, err := xz.NewWriter(&txz)
	require.NoError(t, err)
	_, err = xw.Write(tarBuf.Bytes())
	require.NoError(t, err)
	require.NoError(t, xw.Close())

	path := filepath.Join(t.TempDir(), "binaries.jar")
	f, err := os.Create(path)
	require.NoError(t, err)
	zw := zip.NewWriter(f)
	w, err := zw.Create("META-INF/MANIFEST.MF")
	require.NoError(t, err)
	_, err = w.Write([]byte("Manifest-Version: 1.0\n"))
	require.NoError(t, err)
	w, err = zw.Create("postgres-linux-x86_64.txz")
	require.NoError(t, err)
	_, err = w.Write(txz.Bytes())
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())
	return path
}

// decoders are the ways this machine can decompress: in Go always, and
// with the xz program where it is installed.
func decoders() map[string]string {
	d := map[string]string{"go": ""}
	if p, err := exec.LookPath("xz"); err == nil {
		d["xz program"] = p
	}
	return d
}

func TestUnpackedBinariesKeepTheirExecuteBitsAndLinks(t *testing.T) {
	t.Parallel()
	for name, xzPath := range decoders() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testUnpackKeepsBitsAndLinks(t, xzPath)
		})
	}
}

func testUnpackKeepsBitsAndLinks(t *testing.T, xzPath string) {
	jar := fakeJar(t, []*tar.Header{
		{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o700},
		{Name: "bin/postgres", Typeflag: tar.TypeReg, Mode: 0o700},
		{Name: "lib/libpq.so.5.17", Typeflag: tar.TypeReg, Mode: 0o600},
		{Name: "lib/libpq.so.5", Typeflag: tar.TypeSymlink, Linkname: "libpq.so.5.17"},
	}, map[string]string{"bin/postgres": "#!/bin/sh\n", "lib/libpq.so.5.17": "elf"})
	dest := filepath.Join(t.TempDir(), "pg")

	require.NoError(t, unpackJarWith(jar, dest, xzPath))

	fi, err := os.Stat(filepath.Join(dest, "bin", "postgres"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm(), "executable and readable by the server's user")
	fi, err = os.Stat(filepath.Join(dest, "bin"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o755), fi.Mode().Perm())
	body, err := os.ReadFile(filepath.Join(dest, "lib", "libpq.so.5"))
	require.NoError(t, err)
	require.Equal(t, "elf", string(body))
	fi, err = os.Stat(filepath.Join(dest, "lib", "libpq.so.5.17"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o644), fi.Mode().Perm())
}

func TestUnpackRefusesEntriesThatLandOutsideTheFolder(t *testing.T) {
	t.Parallel()
	for name, h := range map[string]*tar.Header{
		"parent path":       {Name: "../escaped", Typeflag: tar.TypeReg, Mode: 0o644},
		"absolute link":     {Name: "lib/evil", Typeflag: tar.TypeSymlink, Linkname: "/etc"},
		"climbing link":     {Name: "lib/evil", Typeflag: tar.TypeSymlink, Linkname: "../../etc"},
		"climbing hardlink": {Name: "lib/evil", Typeflag: tar.TypeLink, Linkname: "../outside"},
	} {
		for decoder, xzPath := range decoders() {
			t.Run(name+"/"+decoder, func(t *testing.T) {
				t.Parallel()
				jar := fakeJar(t, []*tar.Header{h}, nil)
				root := t.TempDir()
				err := unpackJarWith(jar, filepath.Join(root, "pg"), xzPath)
				require.ErrorIs(t, err, ErrUnsafeArchive)
				_, err = os.Stat(filepath.Join(root, "escaped"))
				require.ErrorIs(t, err, os.ErrNotExist)
			})
		}
	}
}

func TestCorruptArchiveFailsTheUnpack(t *testing.T) {
	t.Parallel()
	for name, xzPath := range decoders() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "corrupt.jar")
			f, err := os.Create(path)
			require.NoError(t, err)
			zw := zip.NewWriter(f)
			w, err := zw.Create("postgres-linux-x86_64.txz")
			require.NoError(t, err)
			_, err = w.Write([]byte("\xfd7zXZ\x00 cut short"))
			require.NoError(t, err)
			require.NoError(t, zw.Close())
			require.NoError(t, f.Close())

			require.Error(t, unpackJarWith(path, filepath.Join(t.TempDir(), "pg"), xzPath))
		})
	}
}
