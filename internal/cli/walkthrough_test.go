package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
)

// walkthroughBlocks are the README's code blocks that talk to the Stripe
// simulator: the walkthrough a newcomer types after `make run`.
func walkthroughBlocks(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	var blocks [][]string
	var cur []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "```") {
			if in && strings.Contains(strings.Join(cur, "\n"), "localhost:12111") {
				blocks = append(blocks, cur)
			}
			in, cur = !in, nil
			continue
		}
		if in {
			cur = append(cur, l)
		}
	}
	return blocks
}

// shell is one sh process the walkthrough's lines run in, in order, so
// variables set by one line are there for the next, as in a terminal.
type shell struct {
	in  io.WriteCloser
	out *bufio.Reader
	n   int
}

func newShell(t *testing.T) *shell {
	t.Helper()
	cmd := exec.Command("sh")
	in, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	sh := &shell{in: in, out: bufio.NewReader(out)}
	// A 4xx or 5xx answer fails the line (curl exits 22) while its body is
	// still printed: every answer the walkthrough shows is a success.
	sh.run(t, `curl() { command curl --fail-with-body -sS "$@"; }`)
	return sh
}

// run runs line and returns its output and exit status.
func (sh *shell) run(t *testing.T, line string) (string, int) {
	t.Helper()
	sh.n++
	mark := fmt.Sprintf("__done_%d__", sh.n)
	_, err := fmt.Fprintf(sh.in, "%s\necho; echo %s $?\n", line, mark)
	require.NoError(t, err)
	var out strings.Builder
	for {
		l, err := sh.out.ReadString('\n')
		require.NoError(t, err, "sh ended while running %q: %s", line, out.String())
		if rest, ok := strings.CutPrefix(l, mark+" "); ok {
			var code int
			_, err := fmt.Sscanf(rest, "%d", &code)
			require.NoError(t, err)
			return strings.TrimSpace(out.String()), code
		}
		out.WriteString(l)
	}
}

// shownFields reads a README answer line such as
// `# {"access":true,"reason":"active",...}`: the fields it shows.
func shownFields(t *testing.T, comment string) map[string]any {
	t.Helper()
	s := strings.TrimSpace(strings.TrimPrefix(comment, "#"))
	s = strings.Replace(s, ",...}", "}", 1)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), "README answer %q", comment)
	return m
}

// The README's walkthrough, run as written against `hookyard dev` started
// in-process on free ports (the README's ports swapped for them): every
// curl answers 2xx, every answer the README shows comes back with the
// fields it shows (waiting while the pipeline catches up, as a reader
// typing the next line does), and `go run . …` lines run as the binary.
// Fails if an answer, a route, the dev token, the dev Stripe secret, the
// simulator's routes or the commands drift from what the README shows.
func TestReadmeWalkthroughAnswersAsShown(t *testing.T) {
	embeddedKafkaPort = 0 // not parallel: no other test in this package runs dev at once
	s := dbtest.NewWithConns(t, 30)
	u, err := url.Parse(dbtest.URL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", s.Name)
	u.RawQuery = q.Encode()
	addrs := map[string]string{"localhost:12111": freeAddr(t), "localhost:8080": freeAddr(t), "localhost:8081": freeAddr(t)}
	for k, v := range map[string]string{"DATABASE_URL": u.String(), "KAFKA_BROKERS": "", "STRIPE_API_BASE": "", "OPS_TOKEN": "",
		"SIM_ADDR": addrs["localhost:12111"], "HTTP_ADDR": addrs["localhost:8080"], "OPS_ADDR": addrs["localhost:8081"],
		"METRICS_ADDR": freeAddr(t), "RECEIPT_WEBHOOK_URL": "", "LOG_LEVEL": "error",
		// The README signs with the example config's dev secret.
		"STRIPE_WEBHOOK_SECRET": ""} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var devErr bytes.Buffer
	go func() {
		done <- Main(ctx, []string{"-config", "../../hookyard.example.yaml", "dev"}, io.Discard, &devErr)
	}()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addrs["localhost:8081"] + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case code := <-done:
			t.Fatalf("hookyard dev exited %d: %s", code, devErr.String())
		default:
		}
		require.True(t, time.Now().Before(deadline), "hookyard dev never ready")
	}

	blocks := walkthroughBlocks(t)
	require.Len(t, blocks, 2, "the README's walkthrough: create and ask, then cancel, replay a stale event and ask")
	sh := newShell(t)
	ports := strings.NewReplacer("localhost:12111", addrs["localhost:12111"], "localhost:8080", addrs["localhost:8080"],
		"localhost:8081", addrs["localhost:8081"])
	checked := 0
	for _, block := range blocks {
		var lines []string
		joined := ""
		for _, l := range block {
			// A trailing backslash continues the command on the next line.
			if c, ok := strings.CutSuffix(strings.TrimRight(l, " "), `\`); ok {
				joined += strings.TrimSpace(c) + " "
				continue
			}
			lines = append(lines, joined+strings.TrimSpace(l))
			joined = ""
		}
		for i, l := range lines {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			if rest, ok := strings.CutPrefix(l, "go run . "); ok {
				if j := strings.Index(rest, " #"); j >= 0 {
					rest = rest[:j]
				}
				var out, errOut bytes.Buffer
				code := Main(ctx, append([]string{"-config", "../../hookyard.example.yaml"}, strings.Fields(rest)...), &out, &errOut)
				require.Equal(t, 0, code, "go run . %s: %s", rest, errOut.String())
				require.NotEmpty(t, out.String(), "go run . %s printed nothing", rest)
				continue
			}
			line := ports.Replace(l)
			var want map[string]any
			if i+1 < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "# {") {
				want = shownFields(t, lines[i+1])
			}
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				out, code := sh.run(t, line)
				if want == nil {
					require.Equal(t, 0, code, "%s\n%s", l, out)
					break
				}
				got := map[string]any{}
				_ = json.Unmarshal([]byte(out), &got)
				match := code == 0
				for k, v := range want {
					match = match && fmt.Sprint(got[k]) == fmt.Sprint(v)
				}
				if match {
					checked++
					break
				}
				require.True(t, time.Now().Before(deadline), "%s\nanswered %s (exit %d), the README shows %v", l, out, code, want)
			}
		}
	}
	require.Equal(t, 2, checked, "both answers the README shows were checked")
	cancel()
	<-done
}
