package githubsim

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The App's installations, as GitHub serves them to the App and to its
// installation tokens. The inconvenient parts first:
//   - an installation token lives an hour
//     (https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app)
//     and may stop working before (revoked, or ExpireInstallationTokens):
//     then every call with it is a 401 "Bad credentials";
//   - every App endpoint wants the App's JWT: one that is not one, is
//     signed by another key, names another App, has expired or expires
//     more than 10 minutes ahead is a 401
//     (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app);
//   - a removed installation is a 404 to the App (GET and minting), and
//     its tokens stop working; a suspended one stays readable (200 with
//     suspended_at) but gets no token (403) and its tokens are refused
//     (https://docs.github.com/en/rest/apps/apps#suspend-an-app-installation);
//   - a spent rate limit is 403 (or 429) with x-ratelimit-remaining: 0 and
//     x-ratelimit-reset
//     (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit).

// InstallationTokenTTLDefault is how long GitHub's installation tokens live.
const InstallationTokenTTLDefault = time.Hour

// install is one installation of the App.
type install struct {
	created     time.Time
	suspendedAt *time.Time
	deleted     bool
}

// installToken is a minted installation token.
type installToken struct {
	installation int64
	expires      time.Time
}

// AddInstallation installs the App on one more account: installation id
// exists from now on (no repository of the simulator's is in it).
func (s *Sim) AddInstallation(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installs[id] = &install{created: s.cfg.Now().UTC()}
}

// SuspendInstallation suspends installation id, or lifts its suspension.
func (s *Sim) SuspendInstallation(id int64, suspended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.installs[id]; in != nil {
		in.suspendedAt = nil
		if suspended {
			t := s.cfg.Now().UTC()
			in.suspendedAt = &t
		}
	}
}

// DeleteInstallation uninstalls the App from installation id's account:
// the installation is gone (404) and its tokens stop working.
func (s *Sim) DeleteInstallation(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in := s.installs[id]; in != nil {
		in.deleted = true
	}
}

// ExpireInstallationTokens makes every token minted so far expire now,
// before its expires_at: a client that trusts expires_at alone gets 401s.
func (s *Sim) ExpireInstallationTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	for k, t := range s.tokens {
		t.expires = now
		s.tokens[k] = t
	}
}

// InstallationTokenMints is how many installation tokens were minted.
func (s *Sim) InstallationTokenMints() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mints
}

// InstallationCalls is how many GET /app/installations/{id} reached the
// simulator.
func (s *Sim) InstallationCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.installCalls
}

// AppCalls is how many calls reached the App's endpoints (minting,
// installations, GET /app), refused or not.
func (s *Sim) AppCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appCalls
}

// SetRateLimitStatus sets the status a spent rate limit is answered with:
// 403 (GitHub's usual) or 429.
func (s *Sim) SetRateLimitStatus(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimitStatus = status
}

func (s *Sim) writeRateLimited(w http.ResponseWriter) {
	s.mu.Lock()
	status := s.rateLimitStatus
	s.mu.Unlock()
	w.Header().Set("X-RateLimit-Limit", "5000")
	w.Header().Set("X-RateLimit-Remaining", "0")
	w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	writeJSON(w, status, map[string]string{"message": "API rate limit exceeded",
		"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"})
}

func writeBadCredentials(w http.ResponseWriter) {
	writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials",
		"documentation_url": "https://docs.github.com/rest"})
}

func writeNotFound(w http.ResponseWriter, doc string) {
	writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found", "documentation_url": doc})
}

// SetInstallationRateLimited spends (or restores) the rate limit of
// installation id's tokens; the App's own calls (its JWT) are counted apart
// and keep working.
func (s *Sim) SetInstallationRateLimited(id int64, limited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limitedInstalls[id] = limited
}

// tokenAccepted checks a repository call's token: the hook's token, or an
// installation token not expired, of an installation neither removed nor
// suspended (whose id it returns). It answers the refusal itself.
func (s *Sim) tokenAccepted(w http.ResponseWriter, r *http.Request) (int64, bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && tok == s.cfg.Token && s.appPub == nil {
		return 0, true
	}
	s.mu.Lock()
	t, minted := s.tokens[tok]
	in := s.installs[t.installation]
	live := minted && in != nil && !in.deleted && s.cfg.Now().Before(t.expires)
	suspended := live && in.suspendedAt != nil
	s.mu.Unlock()
	switch {
	case !live:
		writeBadCredentials(w)
		return 0, false
	case suspended:
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "This installation has been suspended",
			"documentation_url": "https://docs.github.com/rest"})
		return 0, false
	}
	return t.installation, true
}

// asApp wraps an App endpoint: the App's JWT is required, and a spent
// rate limit answers first.
func (s *Sim) asApp(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.appCalls++
		s.mu.Unlock()
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if err := checkAppJWT(tok, s.appPub, []string{s.cfg.AppID, s.cfg.AppClientID}, time.Now()); err != nil {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": err.Error(),
				"documentation_url": "https://docs.github.com/rest"})
			return
		}
		s.mu.Lock()
		limited := s.rateLimited
		s.mu.Unlock()
		if limited {
			s.writeRateLimited(w)
			return
		}
		h(w, r)
	}
}

// installation is installation_id of the request when it exists (not
// removed); nil otherwise. Call with s.mu held.
func (s *Sim) installation(r *http.Request) (int64, *install) {
	id, err := strconv.ParseInt(r.PathValue("installation_id"), 10, 64)
	if err != nil {
		return 0, nil
	}
	in := s.installs[id]
	if in == nil || in.deleted {
		return id, nil
	}
	return id, in
}

// mintToken answers POST /app/installations/{id}/access_tokens: 201
// {token, expires_at}; 404 for an installation that does not exist or was
// removed; 403 for a suspended one.
func (s *Sim) mintToken(w http.ResponseWriter, r *http.Request) {
	const doc = "https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app"
	s.mu.Lock()
	id, in := s.installation(r)
	var tok string
	var expires time.Time
	if in != nil && in.suspendedAt == nil {
		var b [20]byte
		_, _ = rand.Read(b[:])
		tok, expires = "ghs_"+hex.EncodeToString(b[:]), s.cfg.Now().Add(s.cfg.InstallationTokenTTL)
		s.tokens[tok] = installToken{installation: id, expires: expires}
		s.mints++
	}
	s.mu.Unlock()
	switch {
	case in == nil:
		writeNotFound(w, doc)
	case tok == "":
		writeJSON(w, http.StatusForbidden, map[string]string{"message": "This installation has been suspended", "documentation_url": doc})
	default:
		writeJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": expires.UTC().Format(time.RFC3339),
			"permissions": map[string]string{"pull_requests": "read", "metadata": "read"}, "repository_selection": "all"})
	}
}

// getInstallation answers GET /app/installations/{id}: the installation,
// suspended_at set while suspended; 404 once removed.
func (s *Sim) getInstallation(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.installCalls++
	id, in := s.installation(r)
	var doc map[string]any
	if in != nil {
		doc = s.installationDoc(id, in)
	}
	s.mu.Unlock()
	if doc == nil {
		writeNotFound(w, "https://docs.github.com/rest/apps/apps#get-an-installation-for-the-authenticated-app")
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// installationDoc is an installation as GitHub's REST API shows it. Call
// with s.mu held.
func (s *Sim) installationDoc(id int64, in *install) map[string]any {
	login := s.cfg.Org
	if login == "" {
		login, _, _ = strings.Cut(s.repoName, "/")
	}
	doc := map[string]any{"id": id, "app_id": s.appNumber(), "target_type": "Organization", "target_id": s.cfg.OrgID,
		"account":              map[string]any{"login": login, "id": s.cfg.OrgID, "type": "Organization"},
		"repository_selection": "all", "access_tokens_url": fmt.Sprintf("/app/installations/%d/access_tokens", id),
		"permissions": map[string]string{"pull_requests": "read", "metadata": "read"}, "events": []string{"pull_request"},
		"created_at": in.created.Format(time.RFC3339), "updated_at": in.created.Format(time.RFC3339),
		"suspended_at": nil, "suspended_by": nil}
	if in.suspendedAt != nil {
		doc["suspended_at"] = in.suspendedAt.Format(time.RFC3339)
		doc["suspended_by"] = map[string]any{"login": login, "type": "User"}
	}
	return doc
}

// appNumber is the App's numeric id (0 when Config.AppID is not a number).
func (s *Sim) appNumber() int64 {
	n, _ := strconv.ParseInt(s.cfg.AppID, 10, 64)
	return n
}

// getApp answers GET /app: the App the JWT authenticates.
func (s *Sim) getApp(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"id": s.appNumber(), "client_id": s.cfg.AppClientID, "slug": "hookyard-sim"})
}

// repoInstallation answers GET /repositories/{id}/installation: the
// simulator's repository is in the hook's installation while it exists.
func (s *Sim) repoInstallation(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	in := s.installs[s.cfg.InstallationID]
	var doc map[string]any
	if r.PathValue("repo_id") == strconv.FormatInt(s.cfg.RepoID, 10) && in != nil && !in.deleted {
		doc = s.installationDoc(s.cfg.InstallationID, in)
	}
	s.mu.Unlock()
	if doc == nil {
		writeNotFound(w, "https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app")
		return
	}
	writeJSON(w, http.StatusOK, doc)
}
