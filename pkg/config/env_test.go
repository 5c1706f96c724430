package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
)

// NAME_FILE fills NAME for hookyard's own variables and every OTEL_* one,
// never overrides a NAME set directly, ignores *_FILE variables that are
// not hookyard's (LOG_FILE is not LOG's file), and names the variable
// whose file cannot be read.
func TestResolveFileVarsFillsOnlyUnsetKnownVariables(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, v string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(v+"\n"), 0o600))
		return p
	}
	env := map[string]string{
		"SIM_ADDR_FILE":                   file("sim", "127.0.0.1:1"),
		"OTEL_EXPORTER_OTLP_HEADERS_FILE": file("otel", "a=b"),
		"OPS_ADDR":                        "127.0.0.1:2",
		"OPS_ADDR_FILE":                   file("ops", "127.0.0.1:3"),
		"LOG_FILE":                        file("log", "x"),
	}
	environ := make([]string, 0, len(env))
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	set := func(k, v string) error { env[k] = v; return nil }
	require.NoError(t, config.ResolveFileVars(environ, lookup, set))
	require.Equal(t, "127.0.0.1:1", env["SIM_ADDR"])
	require.Equal(t, "a=b", env["OTEL_EXPORTER_OTLP_HEADERS"])
	require.Equal(t, "127.0.0.1:2", env["OPS_ADDR"], "a variable set directly wins")
	_, ok := env["LOG"]
	require.False(t, ok)

	env = map[string]string{"LOG_LEVEL_FILE": filepath.Join(dir, "missing")}
	err := config.ResolveFileVars(nil, lookup, set)
	require.ErrorContains(t, err, "LOG_LEVEL_FILE")
}
