package devpg

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
)

// ErrUnsafeArchive means an archive entry would land outside the folder it
// is unpacked into.
var ErrUnsafeArchive = errors.New("archive entry outside the target folder")

// unpackJar unpacks the one postgres-<os>-<arch>.txz inside a zonky jar
// into dest, decompressed by the xz program when one is installed, else in
// Go. The tar is read in Go either way, not by `tar -xJf`, so that every
// entry's path and link target is checked before anything is written.
func unpackJar(jarPath, dest string) error {
	xzPath, _ := exec.LookPath("xz")
	return unpackJarWith(jarPath, dest, xzPath)
}

// unpackJarWith decompresses with the program at xzPath, or in Go when it
// is empty. The Go decoder needs nothing installed (xz-utils is not in a
// minimal Debian) but is ~6 times slower than xz on the 15 MB archive, and
// ~60 times under the race detector.
func unpackJarWith(jarPath, dest, xzPath string) error {
	zr, err := zip.OpenReader(jarPath)
	if err != nil {
		return fmt.Errorf("open jar: %w", err)
	}
	defer zr.Close()
	var txz *zip.File
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, ".txz") {
			if txz != nil {
				return fmt.Errorf("jar holds more than one .txz: %s and %s", txz.Name, f.Name)
			}
			txz = f
		}
	}
	if txz == nil {
		return errors.New("jar holds no .txz")
	}
	rc, err := txz.Open()
	if err != nil {
		return fmt.Errorf("open %s: %w", txz.Name, err)
	}
	defer rc.Close()
	xr, err := decompressXZ(rc, xzPath)
	if err != nil {
		return fmt.Errorf("read %s: %w", txz.Name, err)
	}
	err = untar(tar.NewReader(xr), dest)
	if cerr := xr.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", txz.Name, err)
	}
	// Folders as 0755 whatever the umask: the server's user must enter them.
	return filepath.WalkDir(dest, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return os.Chmod(p, 0o755)
	})
}

func decompressXZ(r io.Reader, xzPath string) (io.ReadCloser, error) {
	if xzPath == "" {
		xr, err := xz.NewReader(bufio.NewReader(r))
		if err != nil {
			return nil, err
		}
		return io.NopCloser(xr), nil
	}
	cmd := exec.Command(xzPath, "--decompress", "--stdout")
	cmd.Stdin = r
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", xzPath, err)
	}
	return &xzProcess{ReadCloser: out, cmd: cmd, stderr: &stderr}, nil
}

// xzProcess is the xz program's output. Close ends the program when the
// reader stopped early, and reports its failure (a corrupt or truncated
// stream) when the reader did not notice one.
type xzProcess struct {
	io.ReadCloser
	cmd    *exec.Cmd
	stderr *strings.Builder
}

func (p *xzProcess) Close() error {
	_, _ = io.Copy(io.Discard, p.ReadCloser) // xz's own check of the stream's end
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("xz: %w: %s", err, strings.TrimSpace(p.stderr.String()))
	}
	return nil
}

func untar(tr *tar.Reader, dest string) error {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		name := filepath.Clean(filepath.FromSlash(h.Name))
		if !filepath.IsLocal(name) {
			return fmt.Errorf("%w: %q", ErrUnsafeArchive, h.Name)
		}
		target := filepath.Join(dest, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFile(target, tr, readable(fs.FileMode(h.Mode))); err != nil {
				return fmt.Errorf("unpack %s: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			// A link is resolved from its own folder; one that climbs out
			// would let a later entry write through it outside dest.
			if filepath.IsAbs(h.Linkname) || !filepath.IsLocal(filepath.Join(filepath.Dir(name), h.Linkname)) {
				return fmt.Errorf("%w: link %q -> %q", ErrUnsafeArchive, h.Name, h.Linkname)
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return fmt.Errorf("unpack %s: %w", h.Name, err)
			}
		case tar.TypeLink:
			old := filepath.Clean(filepath.FromSlash(h.Linkname))
			if !filepath.IsLocal(old) {
				return fmt.Errorf("%w: hard link %q -> %q", ErrUnsafeArchive, h.Name, h.Linkname)
			}
			if err := os.Link(filepath.Join(dest, old), target); err != nil {
				return fmt.Errorf("unpack %s: %w", h.Name, err)
			}
		}
	}
}

// readable keeps the archive's execute bits and makes every file readable
// by all: as root, the server runs as another user, who must load the
// libraries and share/ files.
func readable(mode fs.FileMode) fs.FileMode {
	perm := mode.Perm() | 0o444
	if perm&0o111 != 0 {
		perm |= 0o111
	}
	return perm &^ 0o022
}

func writeFile(path string, r io.Reader, perm fs.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil { // the umask may have narrowed it
		f.Close()
		return err
	}
	return f.Close()
}
