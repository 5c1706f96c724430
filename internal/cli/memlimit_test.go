package cli

import (
	"log/slog"
	"runtime/debug"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
)

// The receiver holds bodies in memory; without GOMEMLIMIT the Go runtime
// does not know the container's limit and collects too late (GOGC=400),
// and the kernel kills the process instead. It takes the limit from the
// cgroup (v2 memory.max, v1 memory.limit_in_bytes, the lowest along the
// process's cgroup path) or receiver.memory_limit, keeps 15% headroom,
// and leaves an operator's GOMEMLIMIT alone. Fake cgroup trees, as the
// kernel lays them out (Documentation/admin-guide/cgroup-v2.rst
// "memory.max": a number or "max"; cgroup-v1/memory.rst: no limit reads
// as a huge page-rounded number).
func TestReceiverMemoryLimitFollowsTheContainerUnlessGOMEMLIMITIsSet(t *testing.T) {
	t.Parallel()
	const gib = int64(1) << 30
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	v2 := fstest.MapFS{
		"proc/self/cgroup":                           file("0::/kubepods/pod1/ctr\n"),
		"sys/fs/cgroup/memory.max":                   file("max\n"),
		"sys/fs/cgroup/kubepods/pod1/memory.max":     file("2147483648\n"),
		"sys/fs/cgroup/kubepods/pod1/ctr/memory.max": file("max\n"),
	}
	v2ns := fstest.MapFS{ // inside a cgroup namespace the container is the root
		"proc/self/cgroup":         file("0::/\n"),
		"sys/fs/cgroup/memory.max": file("1073741824\n"),
	}
	v1 := fstest.MapFS{ // hybrid: memory on v1, the unified line without it
		"proc/self/cgroup":                                      file("9:name=systemd:/\n4:memory:/docker/abc\n0::/\n"),
		"sys/fs/cgroup/memory/memory.limit_in_bytes":            file("9223372036854771712\n"),
		"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file("536870912\n"),
	}
	v1ns := fstest.MapFS{ // the process's path is not visible in the namespace
		"proc/self/cgroup":                           file("4:memory:/process_api/d4dd\n0::/\n"),
		"sys/fs/cgroup/memory/memory.limit_in_bytes": file("4294967296\n"),
	}
	unlimited := fstest.MapFS{
		"proc/self/cgroup":         file("0::/\n"),
		"sys/fs/cgroup/memory.max": file("max\n"),
	}
	none := fstest.MapFS{}
	noEnv := func(string) string { return "" }

	for _, tc := range []struct {
		name       string
		fsys       fstest.MapFS
		getenv     func(string) string
		configured int64
		limit      int64
		source     string
	}{
		{"v2, lowest along the path", v2, noEnv, 0, 2 * gib * 85 / 100, sourceCgroupV2},
		{"v2 namespace", v2ns, noEnv, 0, gib * 85 / 100, sourceCgroupV2},
		{"v1", v1, noEnv, 0, gib / 2 * 85 / 100, sourceCgroupV1},
		{"v1 namespace", v1ns, noEnv, 0, 4 * gib * 85 / 100, sourceCgroupV1},
		{"no limit", unlimited, noEnv, 0, 0, sourceNone},
		{"no cgroup files", none, noEnv, 0, 0, sourceNone},
		{"config wins", v2, noEnv, gib, gib * 85 / 100, sourceConfig},
		{"GOMEMLIMIT wins", v2, func(k string) string {
			if k == "GOMEMLIMIT" {
				return "300MiB"
			}
			return ""
		}, gib, 0, sourceEnv},
	} {
		got, err := chooseMemoryLimit(tc.getenv, tc.fsys, tc.configured)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.limit, got.Limit, tc.name)
		require.Equal(t, tc.source, got.Source, tc.name)
	}
}

// Every service collects at GOGC=400 unless the operator set GOGC.
func TestServicesCollectLessUnlessGOGCIsSet(t *testing.T) {
	prev, prevLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(prev); debug.SetMemoryLimit(prevLimit) })
	cfg := &config.Config{}
	log := slog.New(slog.DiscardHandler)

	t.Setenv("GOGC", "")
	collectLess(log, "processor", cfg)
	require.Equal(t, gcPercent, debug.SetGCPercent(100), "GOGC unset")

	t.Setenv("GOGC", "150")
	collectLess(log, "processor", cfg)
	require.Equal(t, 100, debug.SetGCPercent(100), "the operator's GOGC is left alone")
}
