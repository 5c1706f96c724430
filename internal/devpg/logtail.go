package devpg

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// tailLines is how many of the server's last lines an error carries.
const tailLines = 20

// logTail passes the server's output to the logger at debug level, line
// by line, and keeps the last lines for the error of a failed start or an
// unexpected exit, which is when they are read.
type logTail struct {
	log     *slog.Logger
	mu      sync.Mutex
	partial []byte
	lines   []string
}

func newLogTail(log *slog.Logger) *logTail { return &logTail{log: log} }

func (t *logTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(t.partial[:i])
		t.partial = t.partial[i+1:]
		t.log.Debug("postgres", "line", line)
		t.lines = append(t.lines, line)
		if len(t.lines) > tailLines {
			t.lines = t.lines[len(t.lines)-tailLines:]
		}
	}
}

func (t *logTail) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if len(t.partial) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(t.partial))
	}
	return strings.Join(lines, "\n")
}
