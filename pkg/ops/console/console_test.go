package console_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/console"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/provider"
)

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// client is a browser without a browser: a cookie jar that does not follow
// redirects, so each answer can be checked.
func client(t testing.TB) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // httptest's own certificate
}

func get(t testing.TB, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func postForm(t testing.TB, c *http.Client, u string, v url.Values) int {
	t.Helper()
	resp, err := c.PostForm(u, v)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// login logs c in with token and returns the session's CSRF token.
func login(t testing.TB, c *http.Client, base, token string) string {
	t.Helper()
	_, page := get(t, c, base+"/console/login")
	m := csrfField.FindStringSubmatch(page)
	require.NotNil(t, m, "the login form carries a CSRF token")
	require.Equal(t, http.StatusSeeOther, postForm(t, c, base+"/console/login", url.Values{"csrf": {m[1]}, "token": {token}}))
	code, page := get(t, c, base+"/console/")
	require.Equal(t, http.StatusOK, code)
	m = csrfField.FindStringSubmatch(page)
	require.NotNil(t, m, "a logged-in page carries the session's CSRF token")
	return m[1]
}

func status(t *testing.T, b *bundle, id string) string {
	t.Helper()
	row, err := inbox.Get(context.Background(), b.p.Pool,
		inbox.Key{Provider: provider.StandardWebhooks, SourceAccount: account, Environment: env, EventID: id}, false)
	require.NoError(t, err)
	return row.Status
}

// makeRetrying leaves an event as the processor leaves one that failed
// with attempts left: retrying, its next attempt an hour away.
func makeRetrying(t *testing.T, b *bundle, id string) {
	t.Helper()
	_, err := b.p.Pool.Exec(t.Context(), `UPDATE webhook_inbox SET status = 'retrying', attempts = 2, processed_at = NULL,
    next_attempt_at = now() + interval '1 hour', last_error = 'provider answered 503' WHERE event_id = $1`, id)
	require.NoError(t, err)
}

func replayOne(id string) url.Values {
	return url.Values{"provider": {provider.StandardWebhooks}, "account": {account}, "environment": {env}, "event_id": {id}}
}

// Every state-changing form is refused without the session's CSRF token
// (missing or wrong), and only then does it act.
func TestConsoleRefusesAFormWithoutItsCSRFToken(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	c := client(t)
	tok := login(t, c, b.url, opsToken)

	v := replayOne("msg_d1")
	require.Equal(t, http.StatusForbidden, postForm(t, c, b.url+"/console/dead/replay-one", v), "no token")
	v.Set("csrf", "forged")
	require.Equal(t, http.StatusForbidden, postForm(t, c, b.url+"/console/dead/replay-one", v), "a wrong token")
	require.Equal(t, "dead", status(t, b, "msg_d1"), "a refused form did nothing")
	require.Equal(t, http.StatusForbidden, postForm(t, c, b.url+"/console/dead/replay", url.Values{"max": {"3"}}))
	require.Equal(t, http.StatusForbidden, postForm(t, c, b.url+"/console/logout", nil))

	before := row(t, b, "msg_d1")
	v.Set("csrf", tok)
	require.Equal(t, http.StatusSeeOther, postForm(t, c, b.url+"/console/dead/replay-one", v))
	// The replayed event fails its fetch again and may be dead again at
	// once: that it acted shows as a new run of failures (or no longer dead).
	after := row(t, b, "msg_d1")
	require.True(t, after.Status != "dead" || after.FirstFailedAt == nil || after.FirstFailedAt.After(*before.FirstFailedAt),
		"with its token the form acts: %+v", after)
}

func row(t *testing.T, b *bundle, id string) inbox.Row {
	t.Helper()
	r, err := inbox.Get(context.Background(), b.p.Pool,
		inbox.Key{Provider: provider.StandardWebhooks, SourceAccount: account, Environment: env, EventID: id}, false)
	require.NoError(t, err)
	return r
}

// What a token may do is enforced by the server: a read-only principal
// sees no replay form, and a POST forged with its own valid CSRF token is
// refused all the same.
func TestReadOnlyPrincipalCannotReplayEvenWithAValidCSRFToken(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	c := client(t)
	tok := login(t, c, b.url, readToken)

	code, page := get(t, c, b.url+"/console/dead")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, "msg_d1")
	require.NotContains(t, page, "replay-filter")
	code, page = get(t, c, b.url+"/console/event/"+provider.StandardWebhooks+"/"+account+"/"+env+"/msg_d1")
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, page, "replay-one")
	require.NotContains(t, page, "payload=1", "no payload link without the payload scope")

	v := replayOne("msg_d1")
	v.Set("csrf", tok)
	require.Equal(t, http.StatusForbidden, postForm(t, c, b.url+"/console/dead/replay-one", v))
	require.Equal(t, http.StatusForbidden, postForm(t, c, b.url+"/console/dead/replay", url.Values{"csrf": {tok}, "max": {"3"}}))
	code, _ = get(t, c, b.url+"/console/dead/replay")
	require.Equal(t, http.StatusForbidden, code, "not even the estimate")
	makeRetrying(t, b, "msg_d2")
	code, page = get(t, c, b.url+"/console/retrying")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, "msg_d2")
	require.NotContains(t, page, "retry-now", "no retry form")
	v2 := replayOne("msg_d2")
	v2.Set("csrf", tok)
	require.Equal(t, http.StatusForbidden, postForm(t, c, b.url+"/console/retrying/retry-now", v2))
	require.Equal(t, "retrying", status(t, b, "msg_d2"))
	code, _ = get(t, c, b.url+"/console/event/"+provider.StandardWebhooks+"/"+account+"/"+env+"/msg_d1?payload=1")
	require.Equal(t, http.StatusForbidden, code, "no payload without the payload scope")
	require.Equal(t, "dead", status(t, b, "msg_d1"))
}

// A bulk replay shows how many events it will touch before it runs, then
// runs as a job that replays exactly those.
func TestReplayByFilterShowsItsEstimateThenRunsAsAJob(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	c := client(t)
	tok := login(t, c, b.url, opsToken)
	code, page := get(t, c, b.url+"/console/dead/replay?provider="+provider.StandardWebhooks+"&type="+typeHint)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `<strong id="count">3</strong>`)
	for _, id := range []string{"msg_d1", "msg_d2", "msg_d3"} {
		require.Equal(t, "dead", status(t, b, id), "the estimate replays nothing")
	}
	resp, err := c.PostForm(b.url+"/console/dead/replay", url.Values{"csrf": {tok}, "provider": {provider.StandardWebhooks},
		"type": {typeHint}, "max": {"3"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	loc := resp.Header.Get("Location")
	require.True(t, strings.HasPrefix(loc, "/console/jobs/"), loc)
	code, page = get(t, c, b.url+loc+"/progress")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, `"replayed":3`)
	require.Contains(t, page, `"status":"`+job.StatusDone+`"`)
}

// The session cookie is HttpOnly and SameSite=Strict, and Secure when the
// request came over TLS; every page carries the strict CSP; nothing but
// the login page answers without a session.
func TestConsoleSessionCookieAndHeadersAreStrict(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	e := health.NewEcho()
	jobs := job.New(s.Pool, slog(t), job.Config{Steps: map[string]job.Step{}})
	_, err := console.Mount(e, s.Pool, slog(t), console.Config{Auth: console.TokenAuthenticator{Token: opsToken}, Jobs: jobs})
	require.NoError(t, err)
	for _, srv := range []*httptest.Server{httptest.NewServer(e), httptest.NewTLSServer(e)} {
		t.Cleanup(srv.Close)
		tls := strings.HasPrefix(srv.URL, "https")
		c := client(t)
		resp, err := c.Get(srv.URL + "/console/")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusSeeOther, resp.StatusCode)
		require.Equal(t, "/console/login", resp.Header.Get("Location"))
		require.Equal(t, console.CSP, resp.Header.Get("Content-Security-Policy"))

		_, page := get(t, c, srv.URL+"/console/login")
		m := csrfField.FindStringSubmatch(page)
		require.NotNil(t, m)
		require.Equal(t, http.StatusForbidden, postForm(t, c, srv.URL+"/console/login", url.Values{"token": {opsToken}}), "login without its form's token")
		require.Equal(t, http.StatusUnauthorized, postForm(t, c, srv.URL+"/console/login", url.Values{"csrf": {m[1]}, "token": {"wrong"}}))
		_, page = get(t, c, srv.URL+"/console/login")
		m = csrfField.FindStringSubmatch(page)
		resp, err = c.PostForm(srv.URL+"/console/login", url.Values{"csrf": {m[1]}, "token": {opsToken}})
		require.NoError(t, err)
		resp.Body.Close()
		var session *http.Cookie
		for _, ck := range resp.Cookies() {
			if ck.Name == "hookyard_console" {
				session = ck
			}
		}
		require.NotNil(t, session, "login sets the session cookie")
		require.True(t, session.HttpOnly)
		require.Equal(t, http.SameSiteStrictMode, session.SameSite)
		require.Equal(t, tls, session.Secure, "Secure exactly when the request came over TLS")
		require.NotContains(t, session.Value, opsToken, "the cookie names a session, it is not the token")
		code, page := get(t, c, srv.URL+"/console/")
		require.Equal(t, http.StatusOK, code)
		require.NotContains(t, page, "<script>", "no inline script")
		require.NotContains(t, page, "style=", "no inline style")
	}
}

// A resource page shows its latest entries and, when older ones are left
// out, links to a longer timeline, up to a bound it refuses to pass.
func TestResourcePageShowsItsLatestEntriesAndLinksToOlderOnes(t *testing.T) {
	t.Parallel()
	b := newBundle(t)
	c := client(t)
	login(t, c, b.url, readToken)
	res := b.url + "/console/resource/" + provider.StandardWebhooks + "/" + account + "/" + env + "/subscription/" + subID
	code, page := get(t, c, res+"?limit=2")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, page, "Only the latest 2 entries are shown")
	require.Contains(t, page, `href="/console/resource/`+provider.StandardWebhooks+"/"+account+"/"+env+"/subscription/"+subID+`?limit=8"`)
	code, page = get(t, c, res)
	require.Equal(t, http.StatusOK, code)
	require.NotContains(t, page, `id="older"`, "the whole story fits the default")
	code, _ = get(t, c, res+fmt.Sprintf("?limit=%d", console.TimelineMax+1))
	require.Equal(t, http.StatusBadRequest, code)
}
