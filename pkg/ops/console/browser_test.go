package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/ops/console"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/provider"
)

// chromiumPath is Debian's chromium, which scripts/chromium.sh installs.
const chromiumPath = "/usr/bin/chromium"

// chromiumEnv names another chromium binary than chromiumPath.
const chromiumEnv = "HOOKYARD_CHROMIUM"

// screenshotsEnv, when 1, makes the browser test write the README's
// screenshots to docs/console/ (they are committed, not made on every run).
const screenshotsEnv = "HOOKYARD_CONSOLE_SCREENSHOTS"

// browser starts a headless chromium of its own (a fresh profile, nothing
// fetched from the network: this machine's network is closed) and returns
// a tab's context. Without chromium the test fails in CI (CI=true) and
// skips elsewhere, saying how to install it.
func browser(t *testing.T) context.Context {
	t.Helper()
	path, chosen := os.LookupEnv(chromiumEnv)
	if !chosen {
		path = chromiumPath
	}
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("chromium"); lerr == nil && !chosen {
			path = p
		} else if os.Getenv("CI") == "true" {
			t.Fatalf("chromium is missing at %s: the CI runs scripts/chromium.sh before the tests", path)
		} else {
			t.Skipf("chromium is missing at %s: run `bash scripts/chromium.sh` (apt-get install -y chromium) to run the browser tests", path)
		}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 800),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	// A liveness bound far above a normal run: a hung browser ends the
	// test instead of the suite's timeout.
	ctx, cancelT := context.WithTimeout(actx, 3*time.Minute)
	ctx, cancelB := chromedp.NewContext(ctx)
	t.Cleanup(func() {
		cancelB()
		cancelT()
		cancelA()
	})
	require.NoError(t, chromedp.Do(ctx), "start chromium")
	return ctx
}

func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	require.NoError(t, chromedp.Do(ctx, steps...))
}

// value runs an action that reads something from the page.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	require.NoError(t, err)
	return v
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	return value(t, ctx, chromedp.Text(chromedp.CSS(sel)))
}

// navigate runs steps that lead to another page (a click on a link or a
// form's button) and waits until that page loaded.
func navigate(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	resp, err := chromedp.RunResponse(ctx, steps...)
	require.NoError(t, err)
	require.Less(t, resp.Status, int64(400), "%s answered %d", resp.URL, resp.Status)
}

// until waits for a JavaScript condition, within a liveness bound far
// above a normal run.
func until(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(2*time.Minute))
}

// loginIn logs the browser in through the login form.
func loginIn(t *testing.T, ctx context.Context, base, token string) {
	t.Helper()
	run(t, ctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#token")), // redirected to the login page
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#backlog-dead")),
	)
}

// fetchStatus posts a form from the page with fetch (as a forged or
// tampered form would) and returns the answer's status.
func fetchStatus(t *testing.T, ctx context.Context, path, body string) int {
	t.Helper()
	js := fmt.Sprintf(`fetch(%q, {method: "POST", credentials: "same-origin", redirect: "manual",
		headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: %q}).then(r => r.status)`, path, body)
	return value(t, ctx, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv(screenshotsEnv) != "1" {
		return
	}
	png := value(t, ctx, chromedp.CaptureScreenshot())
	require.Less(t, len(png), 200_000, "%s stays under 200 KB", name)
	require.NoError(t, os.WriteFile(filepath.Join("..", "..", "..", "docs", "console", name), png, 0o644))
}

// An operator, in a real browser: logs in, searches an event and lands on
// its resource, sees the late snapshot explained as stale, bulk-replays
// the dead events by filter after seeing how many it will touch, follows
// that job to done, cancels another running job, and has a form without
// its CSRF token refused.
func TestOperatorWorksTheConsoleInABrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	b := newBundle(t)

	loginIn(t, ctx, b.url, opsToken)
	require.Equal(t, fmt.Sprint(deadEvents), strings.Fields(text(t, ctx, "#backlog-dead"))[0])
	require.Equal(t, 4, value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#lag tr").length - 1`)), "the lag of every partition")
	screenshot(t, ctx, "overview.png")

	// Search the late event: the only match, so straight to its resource.
	run(t, ctx,
		chromedp.SendKeys(chromedp.CSS("#q"), "msg_v1"),
		chromedp.Submit(chromedp.CSS("#q")),
		chromedp.WaitVisible(chromedp.CSS("#timeline")),
	)
	loc := value(t, ctx, chromedp.Location())
	require.True(t, strings.HasSuffix(loc, "/console/resource/"+provider.StandardWebhooks+"/"+account+"/"+env+"/subscription/"+subID), loc)
	require.Equal(t, "active", text(t, ctx, "#proj-status"), "the late v1 did not win")
	stale := text(t, ctx, "#timeline tr.decision.stale")
	require.Contains(t, stale, "msg_v1")
	require.Contains(t, stale, "stale")
	require.Contains(t, stale, "was active", "the decision says what it met")
	screenshot(t, ctx, "resource.png")

	// A form without its CSRF token is refused, and changes nothing.
	require.Equal(t, 403, fetchStatus(t, ctx, "/console/dead/replay-one",
		"provider="+provider.StandardWebhooks+"&account="+account+"&environment="+env+"&event_id=msg_d1"))
	require.Equal(t, "dead", status(t, b, "msg_d1"))

	// Bulk replay by filter: the estimate first, then the job, followed to done.
	run(t, ctx,
		chromedp.Navigate(b.url+"/console/dead?provider="+provider.StandardWebhooks+"&type="+typeHint),
		chromedp.WaitVisible(chromedp.CSS("#replay-filter")),
		chromedp.Click(chromedp.CSS("#replay-filter")),
		chromedp.WaitVisible(chromedp.CSS("#count")),
	)
	require.Equal(t, fmt.Sprint(deadEvents), text(t, ctx, "#count"))
	navigate(t, ctx, chromedp.Click(chromedp.CSS("#confirm")))
	run(t, ctx,
		chromedp.WaitVisible(chromedp.CSS("#job-status")),
		until(`document.querySelector("#job-status").textContent.trim() === "done"`),
	)
	require.Contains(t, text(t, ctx, "#job-progress"), fmt.Sprintf("replayed %d", deadEvents))

	// The partitions: each one's owner, fence generation and offsets.
	run(t, ctx, chromedp.Navigate(b.url+"/console/partitions"), chromedp.WaitVisible(chromedp.CSS("#partitions")))
	require.Contains(t, text(t, ctx, "#partitions"), "p1", "the processor owns its partitions")

	// Another job, still running: cancel it and watch the page follow it
	// to canceled.
	j, err := b.jobs.Start(t.Context(), "slow", nil)
	require.NoError(t, err)
	run(t, ctx,
		chromedp.Navigate(fmt.Sprintf("%s/console/jobs/%d", b.url, j.ID)),
		chromedp.WaitVisible(chromedp.CSS("#cancel")),
	)
	navigate(t, ctx, chromedp.Click(chromedp.CSS("#cancel")))
	run(t, ctx,
		until(`document.querySelector("#job-status").textContent.trim() === "canceled"`),
	)
	require.False(t, value(t, ctx, chromedp.Evaluate[bool](`document.querySelector("#cancel") !== null`)), "a finished job offers no cancel")
	got, err := job.Get(t.Context(), b.p.Pool, j.ID)
	require.NoError(t, err)
	require.Equal(t, job.StatusCanceled, got.Status)
}

// A read-only principal, in a real browser, sees no replay form, and a
// replay POSTed from its page with its own valid CSRF token is refused by
// the server.
func TestReadOnlyPrincipalSeesNoReplayAndAForgedPostIsRefused(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	b := newBundle(t)
	loginIn(t, ctx, b.url, readToken)
	run(t, ctx, chromedp.Navigate(b.url+"/console/dead"), chromedp.WaitVisible(chromedp.CSS("#dead")))
	require.Zero(t, value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#replay-filter").length`)), "no replay-by-filter link")
	run(t, ctx, chromedp.Navigate(b.url+"/console/event/"+provider.StandardWebhooks+"/"+account+"/"+env+"/msg_d1"),
		chromedp.WaitVisible(chromedp.CSS("#event-status")))
	require.Zero(t, value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("form[action='/console/dead/replay-one']").length`)), "no replay form")
	tok := value(t, ctx, chromedp.Value(chromedp.CSS(`input[name="csrf"]`)))
	require.NotEmpty(t, tok)
	require.Equal(t, 403, fetchStatus(t, ctx, "/console/dead/replay-one",
		"csrf="+tok+"&provider="+provider.StandardWebhooks+"&account="+account+"&environment="+env+"&event_id=msg_d1"))
	require.Equal(t, "dead", status(t, b, "msg_d1"))
}

// An operator, in a real browser, follows the overview's retrying figure to
// the retrying list, sees each event's attempts, next attempt and last
// error, filters the list, and retries one now: it goes round the pipeline
// again at once (and, its provider still down, ends dead), its attempts
// kept, the press recorded in the audit log. The pending list answers from
// the overview's pending figure.
func TestOperatorRetriesARetryingEventNowInABrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	b := newBundle(t)
	makeRetrying(t, b, "msg_d1")
	makeRetrying(t, b, "msg_d2")

	loginIn(t, ctx, b.url, opsToken)
	require.Equal(t, "2", strings.Fields(text(t, ctx, "#backlog-retrying"))[0])
	require.Contains(t, text(t, ctx, "#backlog-retrying"), "next attempt in")
	navigate(t, ctx, chromedp.Click(chromedp.CSS("#backlog-pending")))
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#pending")))
	require.Contains(t, text(t, ctx, "#pending"), "no pending events")

	run(t, ctx, chromedp.Navigate(b.url+"/console/"), chromedp.WaitVisible(chromedp.CSS("#backlog-retrying")))
	navigate(t, ctx, chromedp.Click(chromedp.CSS("#backlog-retrying")))
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#retrying")))
	list := text(t, ctx, "#retrying")
	require.Contains(t, list, "msg_d1")
	require.Contains(t, list, "msg_d2")
	require.Contains(t, list, "provider answered 503", "the last error")
	screenshot(t, ctx, "retrying.png")

	// A filter that matches nothing, then the one event's type.
	// The submit waits for the filtered page's response (navigate): the
	// list is on both pages, so waiting for it could read the old one.
	run(t, ctx, chromedp.SendKeys(chromedp.CSS(`form.filters input[name="type"]`), "no.such.type"))
	navigate(t, ctx, chromedp.Submit(chromedp.CSS(`form.filters input[name="type"]`)))
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#retrying")))
	require.Contains(t, text(t, ctx, "#retrying"), "no retrying events")
	run(t, ctx,
		chromedp.Navigate(b.url+"/console/retrying?type="+typeHint),
		chromedp.WaitVisible(chromedp.CSS("#retrying")),
	)
	require.Equal(t, 2, value(t, ctx, chromedp.Evaluate[int](`document.querySelectorAll("#retrying button.retry-now").length`)))

	// Retry msg_d1 now: its row's button.
	navigate(t, ctx, chromedp.Click(chromedp.CSS(`#retrying button[data-event="msg_d1"]`)))
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#event-status")))
	require.True(t, strings.HasSuffix(value(t, ctx, chromedp.Location()), "/msg_d1"), "lands on the event")
	b.p.WaitEvent("msg_d1", "dead")
	require.Equal(t, "retrying", status(t, b, "msg_d2"), "only the pressed one")
	var attempts int
	require.NoError(t, b.p.Pool.QueryRow(t.Context(), `SELECT attempts FROM webhook_inbox WHERE event_id = 'msg_d1'`).Scan(&attempts))
	require.Equal(t, 3, attempts, "the retry counted as the third attempt: attempts kept")
	var audited int
	require.NoError(t, b.p.Pool.QueryRow(t.Context(), `SELECT count(*) FROM ops_audit WHERE action = $1 AND target->>'EventID' = 'msg_d1'`,
		console.ActionRetryNow).Scan(&audited))
	require.Equal(t, 1, audited, "the press is in the audit log")
}
