//go:build unix

package devpg

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// testConfig is a server on a free port with its data in a folder of the
// test, reachable by the server's user when the test runs as root.
func testConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		DataDir: filepath.Join(reachableTempDir(t), "pg"),
		Port:    freePort(t),
		Logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// reachableTempDir opens the test's temporary folder to other users: its
// parent is made with mode 0700, which the server's user (postgres or
// nobody, when tests run as root) cannot enter.
func reachableTempDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s, err := Start(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func connect(t *testing.T, s *Server) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), s.URL("postgres"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.WithoutCancel(t.Context())) })
	return conn
}

func TestServerKeepsItsDataAcrossRestarts(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)

	first := startServer(t, cfg)
	conn := connect(t, first)
	_, err := conn.Exec(t.Context(), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('written by the first run')")
	require.NoError(t, err)
	require.NoError(t, conn.Close(t.Context()))
	require.NoError(t, first.Stop())
	_, err = pgx.Connect(t.Context(), first.URL("postgres"))
	require.Error(t, err, "the server must be gone after Stop")

	second := startServer(t, cfg)
	var v string
	require.NoError(t, connect(t, second).QueryRow(t.Context(), "SELECT v FROM kept").Scan(&v))
	require.Equal(t, "written by the first run", v)
	require.NoError(t, second.Stop())
}

func TestServerListensOnLoopbackOnlyWithoutUnixSocket(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	var listen, sockets string
	require.NoError(t, connect(t, s).QueryRow(t.Context(),
		"SELECT current_setting('listen_addresses'), current_setting('unix_socket_directories')").Scan(&listen, &sockets))
	require.Equal(t, "127.0.0.1", listen)
	require.Empty(t, sockets)
}

func TestServerNeverRunsAsRoot(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	require.NoError(t, err)
	var uid string
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid = strings.Fields(rest)[1] // effective uid
		}
	}
	require.NotEqual(t, "0", uid)
	require.Equal(t, strconv.Itoa(os.Getuid()) != "0", uid == strconv.Itoa(os.Getuid()),
		"as root the server runs as another user, else as the caller")
}

func TestDataFolderOfAnotherUserIsGivenToTheServerUser(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	require.NoError(t, startServer(t, cfg).Stop())
	// As root: the folder an earlier run made as nobody, before Debian's
	// package created the postgres user. Others can own no files.
	other := os.Getuid()
	if other == 0 {
		other = 54321
	}
	require.NoError(t, filepath.WalkDir(cfg.DataDir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, other, other)
	}))

	s := startServer(t, cfg)
	_, err := connect(t, s).Exec(t.Context(), "CREATE TABLE written_after_the_handover (v int)")
	require.NoError(t, err)
}

func TestServerLeftBehindByACrashedRunIsRecognizedAndStoppedByTheNextStart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	crashed := startServer(t, cfg) // never stopped: its run "crashed"
	_, err := connect(t, crashed).Exec(t.Context(), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
	require.NoError(t, err)
	require.True(t, Leftover(cfg.DataDir, cfg.Port))
	require.False(t, Leftover(cfg.DataDir, cfg.Port+1), "a leftover on another port does not explain what answers on this one")
	require.False(t, Leftover(reachableTempDir(t), cfg.Port), "another data folder's server is not ours")

	next := startServer(t, cfg)
	select {
	case <-crashed.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server left behind still runs")
	}
	var v int
	require.NoError(t, connect(t, next).QueryRow(t.Context(), "SELECT v FROM kept").Scan(&v))
	require.Equal(t, 7, v)
}

func TestStalePidFileOfAnotherProcessDoesNotBlockTheStart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	s := startServer(t, cfg)
	require.NoError(t, s.Stop())
	// Our own pid: alive and no postgres, like a pid reused after a reboot.
	pidFile := filepath.Join(cfg.DataDir, "postmaster.pid")
	require.NoError(t, os.WriteFile(pidFile, fmt.Appendf(nil, "%d\n%s\n", os.Getpid(), cfg.DataDir), 0o600))

	startServer(t, cfg)
}

func TestStartRefusesAPortThatSomethingElseAnswersOn(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	cfg := testConfig(t)
	cfg.Port = ln.Addr().(*net.TCPAddr).Port

	_, err = Start(t.Context(), cfg)
	require.ErrorIs(t, err, ErrPortInUse)
}

func TestDataFolderOfAnotherMajorVersionIsRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	require.NoError(t, os.MkdirAll(cfg.DataDir, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(cfg.DataDir, "PG_VERSION"), []byte("9.6\n"), 0o600))

	_, err := Start(t.Context(), cfg)
	require.ErrorIs(t, err, ErrIncompatibleData)
}

func TestFolderWithFilesButNoClusterIsLeftUntouched(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	require.NoError(t, os.MkdirAll(cfg.DataDir, 0o755))
	notes := filepath.Join(cfg.DataDir, "notes.txt")
	require.NoError(t, os.WriteFile(notes, []byte("mine"), 0o644))

	_, err := Start(t.Context(), cfg)
	require.ErrorIs(t, err, ErrNotDataDir)
	entries, err := os.ReadDir(cfg.DataDir)
	require.NoError(t, err)
	require.Len(t, entries, 1)
}

// The cache is the one `hookyard dev` uses: warm after the first run on a
// machine, when the test calls no mvn and needs no network.
func TestMavenBinariesServeWhereDebiansAreMissing(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.DebianRoot = filepath.Join(t.TempDir(), "no-debian-postgresql")
	s := startServer(t, cfg)
	var version string
	require.NoError(t, connect(t, s).QueryRow(t.Context(), "SHOW server_version").Scan(&version))
	require.True(t, strings.HasPrefix(version, strings.Split(MavenVersionDefault, ".")[0]+"."), version)
	require.Contains(t, s.bins.origin, "maven io.zonky.test.postgres:embedded-postgres-binaries-")
}

func TestServerThatDiesOnItsOwnClosesDoneAndStopSaysSo(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t))
	require.NoError(t, s.cmd.Process.Signal(syscall.SIGQUIT)) // immediate shutdown, as after a PANIC
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("Done did not close after the server died")
	}
	require.ErrorIs(t, s.Stop(), ErrExited)
}
