package devpg

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Binaries names where the PostgreSQL programs come from.
type Binaries string

const (
	// BinariesAuto uses Debian's packages when installed, else Maven's.
	BinariesAuto Binaries = "auto"
	// BinariesDebian uses the newest /usr/lib/postgresql/<major>/bin.
	BinariesDebian Binaries = "debian"
	// BinariesMaven uses the zonky binaries from Maven Central, fetched
	// with mvn and unpacked into CacheDir.
	BinariesMaven Binaries = "maven"
)

const (
	// PortDefault is the port `hookyard dev` serves PostgreSQL on, the one
	// DATABASE_URL's default names.
	PortDefault = 5432
	// MavenVersionDefault is the pinned version of
	// io.zonky.test.postgres:embedded-postgres-binaries-<os>-<arch>.
	MavenVersionDefault = "17.6.0"
	// StartTimeoutDefault bounds initdb plus the wait for the first
	// connection.
	StartTimeoutDefault = 2 * time.Minute
	// StopTimeoutDefault bounds a fast shutdown before an immediate one.
	StopTimeoutDefault = 30 * time.Second
	// DebianRootDefault is where Debian installs one folder per major.
	DebianRootDefault = "/usr/lib/postgresql"
)

// Config says where the server keeps its data, where its programs come
// from and which port it listens on.
type Config struct {
	// DataDir is the cluster's data folder: initialized on the first start,
	// reused afterwards. Defaults to DefaultDataDir().
	DataDir string
	// Port is the TCP port on 127.0.0.1. Defaults to PortDefault.
	Port int
	// Binaries chooses the programs' origin. Defaults to BinariesAuto.
	Binaries Binaries
	// DebianRoot is searched for <major>/bin/postgres. Defaults to
	// DebianRootDefault.
	DebianRoot string
	// CacheDir receives the binaries unpacked from Maven, one folder per
	// version and platform. Defaults to DefaultCacheDir().
	CacheDir string
	// MavenVersion is the zonky binaries' version. Defaults to
	// MavenVersionDefault.
	MavenVersion string
	// StartTimeout bounds the start. Defaults to StartTimeoutDefault.
	StartTimeout time.Duration
	// StopTimeout bounds the fast shutdown. Defaults to StopTimeoutDefault.
	StopTimeout time.Duration
	// Logger receives the start, the stop and the server's own log lines
	// (at debug level). Defaults to discarding.
	Logger *slog.Logger
}

// WithDefaults returns c with every unset field at its default.
func (c Config) WithDefaults() Config {
	c.DataDir = cmp.Or(c.DataDir, DefaultDataDir())
	c.Port = cmp.Or(c.Port, PortDefault)
	c.Binaries = cmp.Or(c.Binaries, BinariesAuto)
	c.DebianRoot = cmp.Or(c.DebianRoot, DebianRootDefault)
	c.CacheDir = cmp.Or(c.CacheDir, DefaultCacheDir())
	c.MavenVersion = cmp.Or(c.MavenVersion, MavenVersionDefault)
	c.StartTimeout = cmp.Or(c.StartTimeout, StartTimeoutDefault)
	c.StopTimeout = cmp.Or(c.StopTimeout, StopTimeoutDefault)
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Port <= 0 || c.Port > 65535:
		return fmt.Errorf("devpg: Port %d is no TCP port", c.Port)
	case c.Binaries != BinariesAuto && c.Binaries != BinariesDebian && c.Binaries != BinariesMaven:
		return fmt.Errorf("devpg: Binaries %q is none of auto, debian, maven", c.Binaries)
	case c.MavenVersion == "":
		return errors.New("devpg: MavenVersion is empty")
	}
	return nil
}

// DefaultDataDir is /var/lib/hookyard/dev-postgres for root and
// $XDG_STATE_HOME/hookyard/dev-postgres (~/.local/state/...) otherwise.
//
// Not under the working directory nor root's home: as root the server runs
// as another user (PostgreSQL refuses root), and that user cannot traverse
// /root (mode 0700), where checkouts and root's caches usually sit. /var/lib
// is where a service's state lives and every user can traverse it. Outside
// the checkout, `git clean -fdx` keeps the dev database, and the checkout
// needs no ignore rule.
func DefaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/hookyard/dev-postgres"
	}
	state := os.Getenv("XDG_STATE_HOME")
	if !filepath.IsAbs(state) {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		state = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(state, "hookyard", "dev-postgres")
}

// DefaultCacheDir is /var/cache/hookyard for root (for the reason given at
// DefaultDataDir: the server's user must execute the binaries) and the
// user's cache folder + /hookyard otherwise.
func DefaultCacheDir() string {
	if os.Geteuid() == 0 {
		return "/var/cache/hookyard"
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "hookyard")
}
