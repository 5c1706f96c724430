package health_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/health"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// /healthz says the process is alive whatever its dependencies do; /readyz
// is 503 while any check fails, and its answer carries no error text (which
// can name hosts, users and databases): the error goes to the log. Fails if
// a failing check is ignored, if checks after a passing one are skipped, or
// if the error leaks into the public answer.
func TestReadyzFailsOnAnyCheckWithoutLeakingTheError(t *testing.T) {
	t.Parallel()
	secret := errors.New(`connect to postgres://hookyard:s3cret@db.internal:5432/hookyard: refused`)
	var logged bytes.Buffer
	var failing bool
	var deadline time.Duration
	e := health.NewEcho()
	health.RegisterProbes(e, slog.New(slog.NewTextHandler(&logged, nil)),
		func(ctx context.Context) error { return nil },
		func(ctx context.Context) error {
			d, ok := ctx.Deadline()
			require.True(t, ok, "checks run under a deadline")
			deadline = time.Until(d)
			if failing {
				return secret
			}
			return nil
		})

	code, body := get(t, e, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ok"}`, body)
	code, body = get(t, e, "/readyz")
	require.Equal(t, http.StatusOK, code)
	require.JSONEq(t, `{"status":"ready"}`, body)
	require.LessOrEqual(t, deadline, 2*time.Second)

	failing = true
	code, body = get(t, e, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"status":"unavailable"}`, body)
	require.NotContains(t, body, "s3cret")
	require.Contains(t, logged.String(), "db.internal", "the operator finds the cause in the log")

	code, _ = get(t, e, "/healthz")
	require.Equal(t, http.StatusOK, code, "alive even when not ready")
}

// /metrics serves what the registry gathers.
func TestMetricsServesTheRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "hookyard_test_things_total", Help: "things"})
	reg.MustRegister(c)
	c.Add(3)
	e := health.NewEcho()
	health.Register(e, reg)
	code, body := get(t, e, "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "hookyard_test_things_total 3")
	code, _ = get(t, e, "/readyz")
	require.Equal(t, http.StatusOK, code, "no checks: ready")
}

func TestServerConfigDefaults(t *testing.T) {
	t.Parallel()
	d := health.ServerConfig{}.WithDefaults()
	require.Equal(t, health.ServerConfig{ReadHeaderTimeout: health.ReadHeaderTimeoutDefault, ReadTimeout: health.ReadTimeoutDefault,
		WriteTimeout: health.ReadTimeoutDefault + 30*time.Second, IdleTimeout: health.IdleTimeoutDefault, MaxConns: health.MaxConnsDefault}, d)
	set := health.ServerConfig{ReadHeaderTimeout: time.Second, ReadTimeout: 2 * time.Second, IdleTimeout: 3 * time.Second, MaxConns: 7}.WithDefaults()
	require.Equal(t, 2*time.Second+30*time.Second, set.WriteTimeout, "the write bound follows the read bound")
	require.Equal(t, 7, set.MaxConns)
	require.Equal(t, time.Second, set.ReadHeaderTimeout)
}

func serve(t *testing.T, cfg health.ServerConfig) (addr string, stop func() error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := health.NewEcho()
	health.RegisterProbes(e, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- health.ServeListener(ctx, e, ln, slog.New(slog.NewTextHandler(io.Discard, nil)), cfg) }()
	return ln.Addr().String(), func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			return errors.New("server did not stop")
		}
	}
}

func healthz(conn net.Conn) (string, error) {
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return "", err
	}
	return bufio.NewReader(conn).ReadString('\n')
}

// Invariant 16 at the HTTP layer: a client that sends its headers slowly
// loses its connection after ReadHeaderTimeout, which frees its slot for the
// next client. Fails without the header timeout: the slow connection would
// stay open and, with MaxConns 1, the next client would never be served.
func TestServerDropsClientsThatSendHeadersSlowly(t *testing.T) {
	t.Parallel()
	addr, stop := serve(t, health.ServerConfig{ReadHeaderTimeout: 300 * time.Millisecond, MaxConns: 1})

	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer slow.Close()
	_, err = io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // never finishes its headers
	require.NoError(t, err)

	// While the slow client holds the only connection, another waits.
	other, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer other.Close()
	require.NoError(t, other.SetDeadline(time.Now().Add(10*time.Second)))
	answered := make(chan string, 1)
	go func() { line, _ := healthz(other); answered <- line }()
	select {
	case line := <-answered:
		// Served only once the slow client was dropped.
		require.Contains(t, line, "200")
	case <-time.After(10 * time.Second):
		t.Fatal("the second client was never served")
	}
	// The slow client's connection is closed by the server.
	require.NoError(t, slow.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = io.ReadAll(slow)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server closed the slow connection")
	require.NoError(t, stop())
}

// Invariant 16: connections beyond MaxConns wait in the accept queue. With
// the one slot held by a keep-alive connection, the next client is not
// served until that connection closes. Fails without the connection limit
// (the second client would be answered at once).
func TestConnectionsBeyondMaxConnsWaitForAFreeSlot(t *testing.T) {
	t.Parallel()
	addr, stop := serve(t, health.ServerConfig{MaxConns: 1, IdleTimeout: time.Minute})

	// A request in progress (headers not finished) holds the only slot; an
	// idle keep-alive would not, the server closes those near the cap.
	first, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	_, err = first.Write([]byte("GET /healthz HTTP/1.1\r\n"))
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)

	second, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer second.Close()
	answered := make(chan string, 1)
	go func() { line, _ := healthz(second); answered <- line }()
	select {
	case line := <-answered:
		t.Fatalf("served beyond MaxConns: %q", line)
	case <-time.After(500 * time.Millisecond):
	}
	require.NoError(t, first.Close())
	select {
	case line := <-answered:
		require.True(t, strings.HasPrefix(line, "HTTP/1.1 200"), line)
	case <-time.After(10 * time.Second):
		t.Fatal("not served after the slot was freed")
	}
	require.NoError(t, stop())
}

// Idle keep-alive connections do not hold slots the server is short of:
// near the cap they are closed, oldest first, and a new client is served
// without waiting for the idle timeout.
func TestIdleKeepAlivesAreClosedNearTheCap(t *testing.T) {
	t.Parallel()
	addr, stop := serve(t, health.ServerConfig{MaxConns: 4, IdleTimeout: time.Minute})
	var idle []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		line, err := healthz(c)
		require.NoError(t, err)
		require.Contains(t, line, "200")
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			_ = c.Close()
		}
	}()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	line, err := healthz(c)
	require.NoError(t, err, "a new client is served while idle keep-alives fill the cap")
	require.Contains(t, line, "200")
	require.NoError(t, stop())
}
