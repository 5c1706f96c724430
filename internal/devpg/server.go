//go:build unix

package devpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	// ErrPortInUse means something else answers on the server's port.
	ErrPortInUse = errors.New("port already in use")
	// ErrIncompatibleData means the data folder was initialized by another
	// PostgreSQL major version than the binaries found.
	ErrIncompatibleData = errors.New("data folder of another PostgreSQL major version")
	// ErrNotDataDir means the data folder holds files but no cluster:
	// devpg initializes only an empty or missing folder.
	ErrNotDataDir = errors.New("folder holds files and no PostgreSQL cluster")
	// ErrExited means the server process ended without being stopped.
	ErrExited = errors.New("postgres exited")
)

// stopGrace bounds the immediate shutdown that follows a fast shutdown
// which took longer than StopTimeout, before the process is killed.
const stopGrace = 10 * time.Second

// Server is a running PostgreSQL started by Start.
type Server struct {
	cfg  Config
	bins binaries
	acct *account
	cmd  *exec.Cmd
	out  *logTail

	done    chan struct{} // closed when the process has been waited for
	exitErr error         // the process's exit, set before done closes

	stopOnce sync.Once
	stopErr  error
}

// Start finds the binaries, initializes cfg.DataDir when it holds no
// cluster yet, starts postgres on 127.0.0.1:cfg.Port and returns once it
// accepts connections. The caller must call Stop.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	c := cfg.WithDefaults()
	var err error
	if c.DataDir, err = filepath.Abs(c.DataDir); err != nil {
		return nil, fmt.Errorf("devpg: DataDir: %w", err)
	}
	if c.CacheDir, err = filepath.Abs(c.CacheDir); err != nil {
		return nil, fmt.Errorf("devpg: CacheDir: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.StartTimeout)
	defer cancel()
	acct, err := serverAccount()
	if err != nil {
		return nil, err
	}
	bins, err := findBinaries(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := acct.reachable(bins.dir); err != nil {
		return nil, fmt.Errorf("binaries: %w", err)
	}
	major, err := serverMajor(ctx, bins)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: c, bins: bins, acct: acct, out: newLogTail(c.Logger), done: make(chan struct{})}
	if err := s.prepareDataDir(ctx, major); err != nil {
		return nil, err
	}
	if err := s.start(ctx); err != nil {
		return nil, err
	}
	c.Logger.InfoContext(ctx, "embedded postgres",
		"data_dir", c.DataDir, "binaries", bins.origin, "major", major, "addr", s.Addr(), "run_as", acct.String())
	return s, nil
}

// Addr is host:port of the server.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.cfg.Port)) }

// DataDir is the absolute data folder the server runs on.
func (s *Server) DataDir() string { return s.cfg.DataDir }

// URL is a connection URL for database as the superuser postgres.
func (s *Server) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), database)
}

// Done is closed when the server process has ended, stopped or not.
func (s *Server) Done() <-chan struct{} { return s.done }

// Stop shuts the server down and waits for it: a fast shutdown (SIGINT:
// open transactions roll back, a checkpoint is written, the next start
// needs no recovery), then an immediate one (SIGQUIT) past StopTimeout.
// It returns ErrExited when the server had ended on its own before.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		select {
		case <-s.done:
			s.stopErr = fmt.Errorf("%w on its own (%s): %s", ErrExited, exitText(s.exitErr), s.out.tail())
			return
		default:
		}
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(s.cfg.StopTimeout):
			s.cfg.Logger.Warn("embedded postgres: no fast shutdown within the stop timeout, immediate shutdown",
				"timeout", s.cfg.StopTimeout)
			_ = s.cmd.Process.Signal(syscall.SIGQUIT)
			select {
			case <-s.done:
			case <-time.After(stopGrace):
				_ = s.cmd.Process.Kill()
				<-s.done
			}
		}
		if s.exitErr != nil {
			s.stopErr = fmt.Errorf("stop postgres: %w: %s", s.exitErr, s.out.tail())
			return
		}
		s.cfg.Logger.Info("embedded postgres stopped", "data_dir", s.cfg.DataDir)
	})
	return s.stopErr
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) (\d+)(\.\d+)?`)

// serverMajor returns the major version as PG_VERSION spells it ("15",
// "9.6"). postgres answers -V before its refusal to run as root.
func serverMajor(ctx context.Context, b binaries) (string, error) {
	out, err := exec.CommandContext(ctx, b.path("postgres"), "-V").Output()
	if err != nil {
		return "", fmt.Errorf("%s -V: %w", b.path("postgres"), err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return "", fmt.Errorf("%s -V: no version in %q", b.path("postgres"), out)
	}
	if n, _ := strconv.Atoi(m[1]); n < 10 {
		return m[1] + m[2], nil
	}
	return m[1], nil
}

// command runs one of the binaries as the server's user.
func (s *Server) command(ctx context.Context, program string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.bins.path(program), args...)
	// The server's user may not be able to enter the caller's working
	// directory (under /root); postgres and initdb resolve paths from it.
	cmd.Dir = "/"
	cmd.SysProcAttr = s.acct.sysProcAttr()
	return cmd
}

// prepareDataDir initializes a missing or empty data folder, and readies
// an initialized one: same major, owned by the server's user, no server
// left running on it.
func (s *Server) prepareDataDir(ctx context.Context, major string) error {
	dir := s.cfg.DataDir
	v, err := os.ReadFile(filepath.Join(dir, "PG_VERSION"))
	if errors.Is(err, fs.ErrNotExist) {
		return s.initdb(ctx)
	}
	if err != nil {
		return fmt.Errorf("read data folder %s: %w", dir, err)
	}
	if got := strings.TrimSpace(string(v)); got != major {
		return fmt.Errorf("%w: %s holds PostgreSQL %s data and the binaries (%s) are PostgreSQL %s: remove the folder, or use PostgreSQL %s",
			ErrIncompatibleData, dir, got, s.bins.origin, major, got)
	}
	if err := s.acct.reachable(filepath.Dir(dir)); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	if err := s.acct.own(dir); err != nil {
		return err
	}
	return s.stopLeftover(ctx)
}

// initdb initializes the cluster in a hidden sibling folder and renames it
// into place: a run stopped during initdb leaves no half-made cluster that
// later starts would trip over.
func (s *Server) initdb(ctx context.Context) error {
	dir := s.cfg.DataDir
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read data folder %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("%w: %s", ErrNotDataDir, dir)
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create the data folder's parent: %w", err)
	}
	if err := s.acct.reachable(parent); err != nil {
		return fmt.Errorf("data folder: %w", err)
	}
	tmp := filepath.Join(parent, "."+filepath.Base(dir)+".initdb")
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("remove an unfinished initdb: %w", err)
	}
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("create data folder: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := s.acct.own(tmp); err != nil {
		return err
	}
	// --locale=C: a fresh machine may name a locale in LANG that is not
	// generated, and initdb would fail on it. Trust is safe only because
	// the server listens on loopback alone and has no unix socket.
	out, err := s.command(ctx, "initdb", "-D", tmp, "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb %s: %w: %s", dir, err, lastLines(string(out), 20))
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("move initialized cluster into %s: %w", dir, err)
	}
	s.cfg.Logger.InfoContext(ctx, "embedded postgres: initialized data folder", "data_dir", dir, "binaries", s.bins.origin)
	return nil
}

// Leftover reports whether a server that an earlier run started on
// dataDir still runs and listens on port: `hookyard dev` must not take it
// for a server of someone else's and use it, or nobody would ever stop it.
func Leftover(dataDir string, port int) bool {
	dir, err := filepath.Abs(dataDir)
	if err != nil {
		return false
	}
	pid, pidPort, err := readPIDFile(dir)
	return err == nil && pid > 0 && pidPort == port && ownsDataDir(pid, dir)
}

// readPIDFile returns the pid and port that postmaster.pid records (lines
// 1 and 4), zeros when there is none or it is cut short.
func readPIDFile(dataDir string) (pid, port int, err error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read postmaster.pid: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	pid, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	if len(lines) > 3 {
		port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	return pid, port, nil
}

// ownsDataDir: a postmaster works in its data folder, so a live process
// whose working directory is dir is the server of dir, whatever its pid
// was before a reboot.
func ownsDataDir(pid int, dir string) bool {
	if !processAlive(pid) {
		return false
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	return err == nil && sameDir(cwd, dir)
}

// stopLeftover handles the postmaster.pid of a run that ended without
// stopping its server. A server working in this data folder is ours: it
// gets a fast shutdown. A pid file naming a process that is no postgres
// (the pid was reused after a reboot) is removed, or postgres would refuse
// to start on a lock nobody holds. Any other postgres is left alone,
// whatever the pid file says.
func (s *Server) stopLeftover(ctx context.Context) error {
	pid, _, err := readPIDFile(s.cfg.DataDir)
	if err != nil {
		return err
	}
	if pid <= 0 || !processAlive(pid) {
		return nil // postgres removes a lock whose process is gone
	}
	if ownsDataDir(pid, s.cfg.DataDir) {
		s.cfg.Logger.WarnContext(ctx, "embedded postgres: stopping a server left behind by an earlier run",
			"pid", pid, "data_dir", s.cfg.DataDir)
		if err := stopPID(ctx, pid, s.cfg.StopTimeout); err != nil {
			return fmt.Errorf("stop the postgres left behind (pid %d): %w", pid, err)
		}
		return nil
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(comm)) != "postgres" {
		s.cfg.Logger.InfoContext(ctx, "embedded postgres: removing a stale postmaster.pid", "pid", pid, "process", strings.TrimSpace(string(comm)))
		if err := os.Remove(filepath.Join(s.cfg.DataDir, "postmaster.pid")); err != nil {
			return fmt.Errorf("remove stale postmaster.pid: %w", err)
		}
	}
	return nil
}

func sameDir(a, b string) bool {
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

// processAlive treats a zombie as gone: a server left behind belongs to
// whichever process adopted it, which may never reap it.
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	switch {
	case err == nil:
		i := strings.LastIndexByte(string(stat), ')')
		return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
	case dirExists("/proc/self"):
		return false
	}
	err = syscall.Kill(pid, 0) // no /proc (not Linux)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// stopPID gives pid a fast shutdown, then an immediate one, and waits for
// it to be gone.
func stopPID(ctx context.Context, pid int, timeout time.Duration) error {
	for _, step := range []struct {
		sig syscall.Signal
		max time.Duration
	}{{syscall.SIGINT, timeout}, {syscall.SIGQUIT, stopGrace}} {
		if err := syscall.Kill(pid, step.sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("signal %v: %w", step.sig, err)
		}
		deadline := time.Now().Add(step.max)
		for processAlive(pid) && time.Now().Before(deadline) {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
		if !processAlive(pid) {
			return nil
		}
	}
	return errors.New("still running after an immediate shutdown")
}

// start runs postgres on loopback only, with no unix socket: nothing but
// TCP on 127.0.0.1 reaches a trust-authenticated cluster, and no socket
// path can clash with the system server's (/var/run/postgresql) or pass
// the 107-byte limit of a socket path under a deep data folder.
func (s *Server) start(ctx context.Context) error {
	if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		_ = conn.Close()
		return fmt.Errorf("%w: something answers on %s already", ErrPortInUse, s.Addr())
	}
	s.cmd = exec.Command(s.bins.path("postgres"), "-D", s.cfg.DataDir, "-p", strconv.Itoa(s.cfg.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=")
	s.cmd.Dir = "/"
	s.cmd.SysProcAttr = s.acct.sysProcAttr()
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	go func() {
		s.exitErr = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx); err != nil {
		_ = s.Stop()
		return err
	}
	return nil
}

// waitReady waits for a connection to succeed and to reach this data
// folder: a server that another run started on the port between our check
// and our bind must not pass for ours.
func (s *Server) waitReady(ctx context.Context) error {
	for {
		select {
		case <-s.done:
			return fmt.Errorf("%w before accepting connections (%s): %s", ErrExited, exitText(s.exitErr), s.out.tail())
		default:
		}
		got, err := s.dataDirectory(ctx)
		if err == nil {
			if got != s.cfg.DataDir && !sameDir(got, s.cfg.DataDir) {
				return fmt.Errorf("%w: %s is served from data folder %s", ErrPortInUse, s.Addr(), got)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for postgres on %s: %w (last attempt: %v): %s", s.Addr(), ctx.Err(), err, s.out.tail())
		case <-s.done:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *Server) dataDirectory(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var dir string
	err = conn.QueryRow(ctx, "SELECT current_setting('data_directory')").Scan(&dir)
	return dir, err
}
