package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/hookyard/hookyard/pkg/config"
)

// Where the receiver's memory limit came from, as its log line says.
const (
	sourceEnv      = "GOMEMLIMIT"
	sourceConfig   = "receiver.memory_limit"
	sourceCgroupV2 = "cgroup v2 memory.max"
	sourceCgroupV1 = "cgroup v1 memory.limit_in_bytes"
	sourceNone     = "none"
)

// memoryLimitPercent is the share of the container's memory the Go heap
// is told it may use: the rest is headroom for what GOMEMLIMIT does not
// count exactly (stacks, fragmentation, the kernel's page cache charged to
// the cgroup) before the kernel kills the process.
const memoryLimitPercent = 85

// cgroupV1Unlimited: cgroup v1 reports "no limit" as the largest
// page-aligned int64 (9223372036854771712); anything this large is none.
const cgroupV1Unlimited = int64(1) << 62

// memoryChoice is the soft memory limit chosen for the Go runtime: Limit
// bytes (0: none set here) and where it came from.
type memoryChoice struct {
	Limit  int64
	Source string
	// Of is the memory the limit is a share of.
	Of int64
}

// chooseMemoryLimit picks the receiver's soft memory limit: none when the
// operator set GOMEMLIMIT (the runtime has read it); else
// memoryLimitPercent of receiver.memory_limit (configured, bytes) when
// set, else of the cgroup's limit read from fsys (the root of the file
// system: proc/self/cgroup, sys/fs/cgroup/...).
func chooseMemoryLimit(getenv func(string) string, fsys fs.FS, configured int64) (memoryChoice, error) {
	if getenv("GOMEMLIMIT") != "" {
		return memoryChoice{Source: sourceEnv}, nil
	}
	if configured > 0 {
		return memoryChoice{Limit: share(configured), Source: sourceConfig, Of: configured}, nil
	}
	of, source, err := cgroupMemoryLimit(fsys)
	if err != nil || of <= 0 {
		return memoryChoice{Source: sourceNone}, err
	}
	return memoryChoice{Limit: share(of), Source: source, Of: of}, nil
}

// share is memoryLimitPercent of n, rounded down, without overflowing
// for the largest limits.
func share(n int64) int64 {
	return n/100*memoryLimitPercent + n%100*memoryLimitPercent/100
}

// cgroupMemoryLimit returns the lowest memory limit along the process's
// cgroup path (an ancestor's limit binds too), 0 for none. Memory is
// managed by v1 when a v1 hierarchy has the memory controller (hybrid
// hosts), else by v2.
func cgroupMemoryLimit(fsys fs.FS) (int64, string, error) {
	data, err := fs.ReadFile(fsys, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil // not Linux, or no /proc
	}
	if err != nil {
		return 0, "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	var v1, v2 string
	hasV1, hasV2 := false, false
	for line := range strings.Lines(string(data)) {
		id, rest, _ := strings.Cut(strings.TrimSpace(line), ":")
		controllers, p, _ := strings.Cut(rest, ":")
		switch {
		case id == "0" && controllers == "":
			v2, hasV2 = p, true
		case containsWord(controllers, "memory"):
			v1, hasV1 = p, true
		}
	}
	switch {
	case hasV1:
		n, err := lowestAlong(fsys, "sys/fs/cgroup/memory", v1, "memory.limit_in_bytes")
		if n >= cgroupV1Unlimited {
			n = 0
		}
		return n, sourceCgroupV1, err
	case hasV2:
		n, err := lowestAlong(fsys, "sys/fs/cgroup", v2, "memory.max")
		return n, sourceCgroupV2, err
	}
	return 0, "", nil
}

func containsWord(list, w string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == w {
			return true
		}
	}
	return false
}

// lowestAlong reads name in the cgroup directory p under mount and in each
// of its ancestors up to the mount, returning the lowest limit (0: none).
// Directories the process cannot see (a cgroup namespace hides the path
// /proc/self/cgroup names) are skipped; the mount's own file is then the
// container's.
func lowestAlong(fsys fs.FS, mount, p, name string) (int64, error) {
	var lowest int64
	for dir := path.Clean("/" + p); ; dir = path.Dir(dir) {
		b, err := fs.ReadFile(fsys, path.Join(mount, dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return 0, fmt.Errorf("read %s: %w", path.Join("/", mount, dir, name), err)
		default:
			v := strings.TrimSpace(string(b))
			if v != "max" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return 0, fmt.Errorf("read %s: %w", path.Join("/", mount, dir, name), err)
				}
				if n > 0 && (lowest == 0 || n < lowest) {
					lowest = n
				}
			}
		}
		if dir == "/" {
			return lowest, nil
		}
	}
}

// applyMemoryLimit sets the Go runtime's soft memory limit as
// chooseMemoryLimit decides and logs what it chose. A cgroup it cannot
// read leaves the limit unset, with a warning: the receiver still runs.
func applyMemoryLimit(log *slog.Logger, getenv func(string) string, fsys fs.FS, configured int64) {
	c, err := chooseMemoryLimit(getenv, fsys, configured)
	if err != nil {
		log.Warn("memory limit: cannot read the cgroup; GOMEMLIMIT left unset", slog.String("error", err.Error()))
		return
	}
	if c.Limit > 0 {
		debug.SetMemoryLimit(c.Limit)
	}
	log.Info("memory limit", slog.String("source", c.Source), slog.Int64("gomemlimit_bytes", debug.SetMemoryLimit(-1)),
		slog.Int64("of_bytes", c.Of), slog.Int("percent", memoryLimitPercent))
}

// gcPercent is the services' GOGC unless the operator set one.
const gcPercent = 400

// collectLess trades memory for less garbage collection in a service: its
// live heap is small (batches of rows and records) and its garbage per
// event large, so GOGC=400 unless the operator chose GOGC (the whole
// pipeline in one process, `hookyard dev` at 1,000 events/s, spent 11% of
// its CPU collecting at the default 100). With GOGC=400 the heap may grow to
// five times the live data before a collection: the runtime must know the
// container's limit, or the kernel kills the process first, so the soft
// memory limit follows the container (or receiver.memory_limit for the
// receiver and dev, which hold request bodies) unless GOMEMLIMIT is set.
func collectLess(log *slog.Logger, service string, cfg *config.Config) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	var configured int64
	if service == "receiver" || service == "dev" {
		configured = cfg.Receiver.MemoryLimit
	}
	applyMemoryLimit(log, os.Getenv, os.DirFS("/"), configured)
}
