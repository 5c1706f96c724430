package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// emit prints t and keeps it for the JSON results file.
func (b *bench) emit(t *table) {
	t.print(b.out)
	b.tables = append(b.tables, t)
}

// resultsFile is what one run writes to bench-results/<timestamp>.json, so
// that runs (of different commits, settings or machines) can be compared
// with jq instead of by reading terminal output.
type resultsFile struct {
	Started  time.Time         `json:"started"`
	Finished time.Time         `json:"finished"`
	Args     []string          `json:"args"`
	Flags    map[string]string `json:"flags"`
	Machine  machineInfo       `json:"machine"`
	Sections []sectionJSON     `json:"sections"`
	Errors   []string          `json:"errors,omitempty"`
}

type machineInfo struct {
	CPUs              int    `json:"cpus"`
	GOMAXPROCS        int    `json:"gomaxprocs"`
	GoVersion         string `json:"go_version"`
	OS                string `json:"os"`
	Arch              string `json:"arch"`
	Hostname          string `json:"hostname"`
	Kernel            string `json:"kernel,omitempty"`
	CPUModel          string `json:"cpu_model,omitempty"`
	Postgres          string `json:"postgres"`
	SynchronousCommit string `json:"synchronous_commit"`
}

// sectionJSON is one printed table; Data holds the section's numbers in
// base units (seconds, events/s) where it has any beyond the cells.
type sectionJSON struct {
	Title  string     `json:"title"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
	Notes  []string   `json:"notes,omitempty"`
	Data   any        `json:"data,omitempty"`
}

// machine describes the machine; it reads the server's version while the
// bench's pool is open (printEnvironment) and keeps it for the results.
func (b *bench) machine(ctx context.Context) machineInfo {
	if b.machineInfo != nil {
		return *b.machineInfo
	}
	m := machineInfo{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH}
	m.Hostname, _ = os.Hostname()
	if v, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(v))
	}
	if v, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(v), "\n") {
			if k, val, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(val)
				break
			}
		}
	}
	if b.pool != nil {
		_ = b.pool.QueryRow(ctx, `SELECT version(), current_setting('synchronous_commit')`).Scan(&m.Postgres, &m.SynchronousCommit)
	}
	b.machineInfo = &m
	return m
}

// writeResults writes every table printed so far, the flags and the machine
// to dir/<started, RFC 3339>.json and returns the file's path.
func (b *bench) writeResults(ctx context.Context, dir string, started time.Time, runErr error) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create results dir: %w", err)
	}
	r := resultsFile{Started: started.UTC(), Finished: time.Now().UTC(), Args: b.opts.args, Flags: b.opts.flags,
		Machine: b.machine(ctx), Sections: []sectionJSON{}}
	for _, t := range b.tables {
		r.Sections = append(r.Sections, sectionJSON{Title: t.title, Header: t.header, Rows: t.rows, Notes: t.notes, Data: t.data})
	}
	if runErr != nil {
		r.Errors = append(r.Errors, runErr.Error())
	}
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", fmt.Errorf("encode results: %w", err)
	}
	// RFC 3339 without colons: a file name that every filesystem and shell
	// takes as is, and that sorts by time.
	name := strings.ReplaceAll(started.UTC().Format(time.RFC3339), ":", "") + ".json"
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
		return "", fmt.Errorf("write results: %w", err)
	}
	return path, nil
}
