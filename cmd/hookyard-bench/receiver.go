package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hookyard/hookyard/internal/testkit/freeport"
)

// receiverConfig is the subprocess's config: one Stripe endpoint.
const receiverConfig = `endpoints:
  - id: ` + benchEndpoint + `
    provider: stripe
    source_account: ` + benchAccount + `
    environment: test
    secrets: ["` + benchSecret + `"]
`

// warmup runs before the timed closed loop: connections open, pools fill.
const warmup = time.Second

// presignBudget caps the memory spent on presigned deliveries.
const presignBudget = 256 << 20

func (b *bench) receiverSection(ctx context.Context) error {
	dir, err := os.MkdirTemp("", "hookyard-bench-")
	if err != nil {
		return fmt.Errorf("temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	c := b.opts.concurrency

	bin, err := b.hookyardBinary(ctx)
	if err != nil {
		return err
	}

	// The ceiling is the plain two-row transaction: the outbox's NOTIFY
	// trigger (00002_outbox_notify.sql) is hookyard's own cost, not the
	// database's, so it is off for the ceiling and measured apart.
	var pg1, pgC, pgCNotify pgbenchResult
	for _, run := range []struct {
		clients int
		notify  bool
		res     *pgbenchResult
	}{{1, false, &pg1}, {c, false, &pgC}, {c, true, &pgCNotify}} {
		if err := b.truncate(ctx, truncateReceiverSQL); err != nil {
			return err
		}
		if err := b.setNotifyTrigger(ctx, run.notify); err != nil {
			return err
		}
		b.step("pgbench: receiver transaction, c=%d, NOTIFY trigger %v, %s", run.clients, run.notify, b.opts.duration)
		*run.res, err = b.runPgbench(ctx, dir, run.clients)
		if err != nil {
			_ = b.setNotifyTrigger(context.WithoutCancel(ctx), true)
			return err
		}
	}
	if err := b.setNotifyTrigger(ctx, true); err != nil {
		return err
	}
	if err := b.truncate(ctx, truncateReceiverSQL); err != nil {
		return err
	}

	// Building and signing a delivery costs about what the receiver spends
	// verifying it, on the same two cores; presign when that would be
	// noticeable, else sign inline and keep the memory.
	cost := generatorCost()
	expected := pgC.tps * 3 // group commit may beat one-event transactions
	inline := float64(cost)*expected < 0.02*float64(time.Second)*float64(runtime.NumCPU())
	perReq := len(stripeEventTemplate) + 128
	maxPool := presignBudget / perReq
	if b.opts.duration > 4*time.Minute {
		inline = true // a presigned timestamp would pass Stripe's 5 min tolerance
	}

	cfgPath := filepath.Join(dir, "bench.yaml")
	cfgText := receiverConfig
	if b.opts.commitWorkers > 0 {
		cfgText += fmt.Sprintf("receiver:\n  commit_workers: %d\n", b.opts.commitWorkers)
	}
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o600); err != nil {
		return fmt.Errorf("write receiver config: %w", err)
	}
	b.step("starting the receiver subprocess")
	rp, err := startReceiver(ctx, bin, cfgPath, b.opts.dbURL, b.opts.receiverLog, b.progress)
	if err != nil {
		return err
	}
	defer rp.stop()
	url := "http://" + rp.addr + "/webhooks/" + benchEndpoint
	cl := loadClient(4 * c)
	defer cl.CloseIdleConnections()

	warm := make([]*source, c)
	for w := range warm {
		warm[w] = &source{prefix: fmt.Sprintf("evt_warm%d_", w)}
	}
	b.step("receiver warm-up, %s", warmup)
	if st := closedLoop(ctx, cl, url, warm, warmup); st.accepted == 0 {
		return fmt.Errorf("receiver accepted nothing during warm-up: %s; receiver log:\n%s", st.errorSummary(), rp.logTail())
	}
	if err := b.truncate(ctx, truncateReceiverSQL); err != nil {
		return err
	}

	srcs := make([]*source, c)
	presigned := 0
	if !inline {
		perWorker := min(int(expected*b.opts.duration.Seconds()/float64(c))+1, maxPool/c)
		b.step("presigning %d deliveries per worker", perWorker)
		for w := range srcs {
			prefix := fmt.Sprintf("evt_%d_", w)
			srcs[w] = &source{prefix: prefix, pool: presign(prefix, perWorker)}
		}
		presigned = perWorker * c
	} else {
		for w := range srcs {
			srcs[w] = &source{prefix: fmt.Sprintf("evt_%d_", w)}
		}
	}
	b.step("receiver closed loop, c=%d, %s", c, b.opts.duration)
	closed := closedLoop(ctx, cl, url, srcs, b.opts.duration)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	srcs = nil
	rowsClosed, err := b.count(ctx, `SELECT count(*) FROM webhook_inbox`)
	if err != nil {
		return err
	}
	outboxClosed, err := b.count(ctx, `SELECT count(*) FROM outbox`)
	if err != nil {
		return err
	}
	peak := float64(closed.accepted) / closed.elapsed.Seconds()

	if err := b.truncate(ctx, truncateReceiverSQL); err != nil {
		return err
	}
	half := peak / 2
	var open loadStats
	if half >= 1 {
		src := &source{prefix: "evt_half_"}
		if !inline {
			src.pool = presign(src.prefix, min(int(half*b.opts.duration.Seconds())+1, maxPool))
		}
		b.step("receiver open loop at %s/s (half of peak), %s", fmtRate(half), b.opts.duration)
		open = openLoop(ctx, cl, url, src.get, half, b.opts.duration, max(4*c, 64))
	}
	rowsOpen, err := b.count(ctx, `SELECT count(*) FROM webhook_inbox`)
	if err != nil {
		return err
	}
	hwm, err := vmHWM(rp.pid())
	if err != nil {
		return err
	}
	rp.stop()

	t := newTable("A. Receiver vs the Postgres ceiling", "measure", "value")
	t.add("pgbench tps, c=1 (receiver tx: inbox row + outbox row, no trigger)", fmtRate(pg1.tps))
	t.add("pgbench latency avg, c=1", fmtDur(pg1.latencyAvg))
	t.add(fmt.Sprintf("pgbench tps, c=%d  (a)", c), fmtRate(pgC.tps))
	t.add(fmt.Sprintf("pgbench latency avg, c=%d", c), fmtDur(pgC.latencyAvg))
	t.add(fmt.Sprintf("pgbench tps, c=%d, with the outbox NOTIFY trigger", c), fmtRate(pgCNotify.tps))
	t.add(fmt.Sprintf("pgbench latency avg, c=%d, with the trigger", c), fmtDur(pgCNotify.latencyAvg))
	t.add(fmt.Sprintf("receiver accepted/s, c=%d closed loop  (b)", c), fmtRate(peak))
	t.add("receiver latency p50 / p99 at peak", fmtDur(percentile(closed.lat, 0.50))+" / "+fmtDur(percentile(closed.lat, 0.99)))
	t.add("ratio b/a", fmt.Sprintf("%.2f", peak/pgC.tps))
	t.add("accepted / inbox rows / outbox rows after closed loop",
		fmt.Sprintf("%s / %s / %s", fmtInt(closed.accepted), fmtInt(rowsClosed), fmtInt(outboxClosed)))
	t.add("errors in closed loop", closed.errorSummary())
	t.add("half load: target / achieved accepted/s", fmtRate(half)+" / "+fmtRate(float64(open.accepted)/open.elapsed.Seconds()))
	t.add("half load: latency p50", fmtDur(percentile(open.lat, 0.50)))
	t.add("half load: latency p99", fmtDur(percentile(open.lat, 0.99)))
	t.add("half load: latency max", fmtDur(percentile(open.lat, 1)))
	t.add("half load: accepted / inbox rows", fmt.Sprintf("%s / %s", fmtInt(open.accepted), fmtInt(rowsOpen)))
	t.add("errors at half load", open.errorSummary())
	t.add("receiver peak RSS (VmHWM)", fmt.Sprintf("%.1f MiB", float64(hwm)/1024))
	gen := fmt.Sprintf("signed inline, %s/delivery", fmtDur(cost))
	if !inline {
		gen = fmt.Sprintf("presigned %s, %s/delivery", fmtInt(int64(presigned)), fmtDur(cost))
	}
	gen += fmt.Sprintf(", body %s B", fmtInt(int64(len(stripeEventBody("evt_15_1234", "sub_1234", time.Now().Unix())))))
	t.add("load generator: build+sign", gen)
	t.note("a: the ceiling: pgbench -M prepared -j 2, one event per transaction (BEGIN; INSERT webhook_inbox; INSERT webhook_inbox_body; INSERT outbox; END: intake's statement as one event's transaction), same event body as the HTTP load, with the outbox's NOTIFY trigger disabled (it is hookyard's own cost, not the database's; the row below a shows it, and the receiver runs with it).")
	t.note("b: 200 answers with \"status\":\"accepted\" per second from `hookyard receiver` (a subprocess), C keep-alive workers, each sending its next signed ~1.4 KB Stripe event when the last is answered; the receiver group-commits concurrent events into one statement, so b/a > 1 is possible.")
	t.note("Half load: open loop at b/2, latency from each delivery's scheduled send time. Load generator, receiver and Postgres share the machine.")
	b.emit(t)
	return nil
}

// setNotifyTrigger turns the outbox's NOTIFY trigger on or off in the bench
// database.
func (b *bench) setNotifyTrigger(ctx context.Context, on bool) error {
	verb := "DISABLE"
	if on {
		verb = "ENABLE"
	}
	if _, err := b.pool.Exec(ctx, `ALTER TABLE outbox `+verb+` TRIGGER outbox_notify`); err != nil {
		return fmt.Errorf("%s the outbox NOTIFY trigger: %w", strings.ToLower(verb), err)
	}
	return nil
}

// buildHookyard builds the module root's binary into dir.
func buildHookyard(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the hookyard module: run from the repository or pass -bin")
	}
	bin := filepath.Join(dir, "hookyard")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build hookyard: %w\n%s", err, out)
	}
	return bin, nil
}

// receiverProc is `hookyard receiver` running as a subprocess.
type receiverProc struct {
	cmd    *exec.Cmd
	addr   string
	exited chan struct{}
	log    *tail
	once   sync.Once
}

func startReceiver(ctx context.Context, bin, cfgPath, dbURL string, passLog bool, progress io.Writer) (*receiverProc, error) {
	addr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	metricsAddr, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	// `hookyard receiver` refuses to start without an ops token of its own
	// (the dev token is for `hookyard dev` only); nothing here uses it.
	var tok [24]byte
	_, _ = rand.Read(tok[:])
	// Later entries win: the bench's database, never the caller's DATABASE_URL.
	return startHookyard(ctx, bin, cfgPath, "receiver", addr, passLog, progress,
		"DATABASE_URL="+dbURL, "HTTP_ADDR="+addr, "METRICS_ADDR="+metricsAddr, "LOG_LEVEL=warn",
		"OPS_TOKEN="+hex.EncodeToString(tok[:]), "OPS_TOKEN_FILE=")
}

// startHookyard runs `hookyard -config cfgPath cmd` with env added to the
// bench's environment and waits until addr answers /readyz.
func startHookyard(ctx context.Context, bin, cfgPath, cmd, addr string, passLog bool, progress io.Writer, env ...string) (*receiverProc, error) {
	rp := &receiverProc{addr: addr, exited: make(chan struct{}), log: &tail{max: 64 << 10}}
	rp.cmd = exec.Command(bin, "-config", cfgPath, cmd)
	rp.cmd.Env = append(os.Environ(), env...)
	if passLog {
		rp.cmd.Stderr = io.MultiWriter(rp.log, progress)
	} else {
		rp.cmd.Stderr = rp.log
	}
	rp.cmd.Stdout = rp.log
	if err := rp.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd, err)
	}
	go func() {
		_ = rp.cmd.Wait()
		close(rp.exited)
	}()
	if err := rp.waitReady(ctx, 60*time.Second); err != nil {
		rp.stop()
		return nil, err
	}
	return rp, nil
}

func (rp *receiverProc) pid() int { return rp.cmd.Process.Pid }

func (rp *receiverProc) logTail() string { return lastLines(rp.log.String(), 20) }

func (rp *receiverProc) waitReady(ctx context.Context, limit time.Duration) error {
	cl := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(limit)
	for {
		resp, err := cl.Get("http://" + rp.addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-rp.exited:
			return fmt.Errorf("%s exited before ready (%s); log:\n%s", rp.cmd.Args[len(rp.cmd.Args)-1], rp.cmd.ProcessState, rp.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s; log:\n%s", rp.cmd.Args[len(rp.cmd.Args)-1], limit, rp.logTail())
		}
	}
}

// stop asks the receiver to shut down and kills it if it does not.
func (rp *receiverProc) stop() {
	rp.once.Do(func() {
		_ = rp.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-rp.exited:
		case <-time.After(15 * time.Second):
			_ = rp.cmd.Process.Kill()
			<-rp.exited
		}
	})
}

// vmHWM reads a process's peak resident set size in KiB.
func vmHWM(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read receiver peak RSS: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmHWM %q: %w", v, err)
			}
			return kb, nil
		}
	}
	return 0, fmt.Errorf("read receiver peak RSS: no VmHWM in /proc/%d/status", pid)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = bytes.Clone(t.buf[over:])
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
