package chaos

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// proc is one service process of the hookyard binary. It can be killed,
// frozen, resumed and started again with the same environment.
type proc struct {
	name    string
	bin     string
	args    []string
	env     []string
	logPath string
	// health is the URL whose answer says the process is up ("" skips).
	health string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: open log of %s: %w", p.name, err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group: a signal to the harness (Ctrl-C) reaches it
	// only through stopAll, which stops it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("chaos: start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.cmd, p.done, p.log = cmd, done, f
	return nil
}

func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func (p *proc) signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return fmt.Errorf("chaos: %s is not running", p.name)
	}
	return cmd.Process.Signal(sig)
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() error {
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	p.wait(10 * time.Second)
	return nil
}

// stop asks the process to end (SIGTERM), then kills it after grace.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a frozen process cannot handle SIGTERM
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

func (p *proc) wait(d time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// exited says whether the process ended on its own.
func (p *proc) exited() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// waitHealthy polls the health URL until it answers 200.
func (p *proc) waitHealthy(ctx context.Context, d time.Duration) error {
	if p.health == "" {
		return nil
	}
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("chaos: %s exited at start; see %s; it ended with:\n%s", p.name, p.logPath, logTail(p.logPath, 2048))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.health, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("chaos: %s not healthy within %s; see %s", p.name, d, p.logPath)
}

func logFile(dir, name string) string { return filepath.Join(dir, name+".log") }

// logTail is the last n bytes of a service's log, for an error that must
// say why the service stopped where only the error is kept (CI).
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		_, _ = f.Seek(-n, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}
