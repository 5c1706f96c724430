package cli

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "v")
	require.NoError(t, os.WriteFile(p, []byte(content+"\n"), 0o600))
	return p
}

// VAR_FILE is documented for any variable: the variables the binary reads
// outside the config's own list (HOOKYARD_CONFIG, LOG_LEVEL, SIM_ADDR,
// and the OTEL_* ones the OpenTelemetry SDK reads) must honour it too.
// Not parallel: it sets the process environment, as a container does.
func TestVarFileWorksForEveryVariableTheBinaryReads(t *testing.T) {
	for _, v := range []string{"HOOKYARD_CONFIG", "LOG_LEVEL", "SIM_ADDR", "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_HEADERS"} {
		t.Setenv(v, "")
	}
	t.Setenv("HOOKYARD_CONFIG_FILE", writeFile(t, "/nonexistent/config-from-file.yaml"))
	t.Setenv("LOG_LEVEL_FILE", writeFile(t, "warn"))
	t.Setenv("SIM_ADDR_FILE", writeFile(t, "127.0.0.1:12999"))
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS_FILE", writeFile(t, "authorization=Bearer x"))

	var stdout, stderr bytes.Buffer
	require.Equal(t, 1, Main(context.Background(), []string{"migrate"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "config-from-file.yaml", "HOOKYARD_CONFIG_FILE names the config")
	require.Equal(t, slog.LevelWarn, logLevel())
	require.Equal(t, "127.0.0.1:12999", envOr("SIM_ADDR", SimAddrDefault))
	require.Equal(t, "authorization=Bearer x", os.Getenv("OTEL_EXPORTER_OTLP_HEADERS"), "the SDK reads the process environment")
}

// With only DATABASE_URL_FILE set, the configured database is the one
// in the file: `hookyard dev` must not start an embedded one in its place.
// Not parallel: it sets the process environment.
func TestDevDatabaseDecisionSeesDatabaseURLFile(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	free := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close()) // nothing answers there: dev would start its own
	t.Setenv(devPostgresPortEnv, strconv.Itoa(free))
	t.Setenv("DATABASE_URL", "")
	const url = "postgres://app@db.internal:5432/hookyard?sslmode=require"
	t.Setenv("DATABASE_URL_FILE", writeFile(t, url))

	cfg := &config.Config{DatabaseURL: url}
	_, stop, err := devDatabase(context.Background(), "dev", cfg, slog.New(slog.DiscardHandler))
	if stop != nil {
		defer func() { _ = stop() }()
	}
	require.NoError(t, err)
	require.Equal(t, url, cfg.DatabaseURL, "the configured database stays")
}
