// Package githubsim is an in-process GitHub for `hookyard dev` and tests:
// one webhook (a repository's or an organization's) that sends signed
// deliveries to a receiver, lists them, and redelivers on request.
//
// It imitates the parts of GitHub that catch integrations out, first:
//   - GitHub never redelivers a failed delivery by itself
//     (https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks);
//     a delivery that got no 2xx stays failed until someone asks;
//   - a new webhook's content type is application/x-www-form-urlencoded
//     unless its owner picks JSON: the JSON travels in the form's payload
//     field, and X-Hub-Signature-256 signs the form
//     (https://docs.github.com/en/webhooks/using-webhooks/creating-webhooks);
//     the simulator sends forms unless Config.ContentType says JSON;
//   - a repository hook's deliveries carry the repository, an
//     organization hook's the organization, an App's the installation,
//     each with its id; a rename or a transfer (RenameRepo) changes the
//     repository's full_name and keeps its id
//     (https://docs.github.com/en/repositories/creating-and-managing-repositories/renaming-a-repository);
//   - only deliveries of the last 3 days are redelivered: an older one is
//     refused with 422 Validation Failed, an id it never had is a 404
//     (https://docs.github.com/en/rest/repos/webhooks#redeliver-a-delivery-for-a-repository-webhook);
//   - a redelivery keeps the X-GitHub-Delivery guid of the original, gets
//     a new delivery id and "redelivery": true, and is sent after the 202
//     that accepts the request, not during it;
//   - the deliveries list pages by cursor only (per_page 1 to 100, default
//     30, the next page's cursor in the Link header's rel="next"), newest
//     first, and keeps deliveries of the last 3 days
//     (https://docs.github.com/en/rest/repos/webhooks#list-deliveries-for-a-repository-webhook);
//     a cursor naming a delivery no longer listed is a 422;
//   - every API call needs the hook's token (401 otherwise); an unknown
//     hook is a 404;
//   - an App's webhook (Config.AppID) is listed at /app/hook/deliveries
//     with a JSON Web Token the App signs (RS256, iss the App's id); a
//     token that is not one, is signed by another key, names another App,
//     has expired or expires more than 10 minutes ahead is a 401, as is a
//     personal token
//     (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app);
//   - an App's installations and their tokens (app.go): tokens expire
//     (early on request), a removed installation is a 404, a suspended
//     one is kept with suspended_at.
//
// Control endpoints for curl:
//
//	POST /sim/deliveries  {"event":"push","payload":{...}}   deliver an event now
//	POST /sim/down        {"down": true}                      deliveries fail (no connection)
package githubsim

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookyard/hookyard/internal/simhttp"
	"github.com/hookyard/hookyard/pkg/provider/github"
)

// DeliveryRetention is how long deliveries stay listed.
const DeliveryRetention = 3 * 24 * time.Hour

// Dev defaults: the hook `hookyard dev` simulates.
const (
	DevRepo   = "dev-org/dev-repo"
	DevHookID = 1
	DevToken  = "ghp_hookyard_dev"
	// DevRepoID, DevOrgID and DevInstallationID are the ids the hook's
	// repository, organization and App installation carry.
	DevRepoID         = 1296269
	DevOrgID          = 9919
	DevInstallationID = 42
)

// Content types a GitHub webhook can be set to.
const (
	ContentTypeForm = "application/x-www-form-urlencoded"
	ContentTypeJSON = "application/json"
)

// Config configures a Sim.
type Config struct {
	// WebhookURL receives deliveries.
	WebhookURL string
	// Secret signs them (X-Hub-Signature-256).
	Secret string
	// Repo ("owner/name") or Org owns the hook; HookID is its id. Default
	// to DevRepo and DevHookID.
	Repo   string
	Org    string
	HookID int64
	// Token is the API token the simulator accepts. Defaults to DevToken.
	Token string
	// AppID makes the hook a GitHub App's (Repo, Org, HookID and Token are
	// not used); AppKey is its private key, PEM (generated when empty, and
	// handed out by Hook).
	AppID  string
	AppKey string
	// AppClientID is the App's client id, which GitHub also accepts as
	// the token's issuer.
	AppClientID string
	// RepoID, OrgID and InstallationID are the ids of the hook's
	// repository, organization and App installation. Default to DevRepoID,
	// DevOrgID and DevInstallationID.
	RepoID         int64
	OrgID          int64
	InstallationID int64
	// InstallationTokenTTL is how long an installation token GitHub mints
	// lives. Defaults to InstallationTokenTTLDefault, GitHub's hour.
	InstallationTokenTTL time.Duration
	// ContentType is the webhook's content type, ContentTypeForm or
	// ContentTypeJSON. Defaults to ContentTypeForm, GitHub's default.
	ContentType string
	// HTTPClient sends deliveries; nil uses a client with a 10s timeout,
	// GitHub's own delivery deadline.
	HTTPClient *http.Client
	// Now is GitHub's clock: delivery times, the 3-day listing and
	// redelivery limit. Defaults to time.Now.
	Now func() time.Time
}

// Delivery is a delivery as the simulator keeps it.
type Delivery struct {
	github.Delivery
	body []byte
}

// Sim is safe for concurrent use.
type Sim struct {
	cfg  Config
	mux  *http.ServeMux
	wg   sync.WaitGroup
	mu   sync.Mutex
	seq  int64
	down bool
	log  []Delivery // oldest first
	// redeliveries counts POST .../attempts by delivery guid.
	redeliveries map[string]int
	// appPub checks an App's tokens (nil for a repository or org hook).
	appPub *rsa.PublicKey
	// repoName is the repository's full name now (RenameRepo).
	repoName string
	// pulls are the repository's pull requests by number (SetPull).
	pulls map[int64]map[string]any
	// rateLimited makes every API call a spent primary rate limit.
	rateLimited bool
	// pullCalls counts GET .../pulls/{number}.
	pullCalls int
	// rateLimitStatus is the status of a spent rate limit: 403, or 429.
	rateLimitStatus int
	// limitedInstalls have spent their tokens' rate limit.
	limitedInstalls map[int64]bool
	// installs are the App's installations by id (Config.AppID).
	installs map[int64]*install
	// tokens are the installation tokens minted, by token.
	tokens map[string]installToken
	// mints counts installation tokens minted; installCalls GET
	// /app/installations/{id}; appCalls every call to an App endpoint.
	mints, installCalls, appCalls int
}

// New returns a simulator with no deliveries.
func New(cfg Config) *Sim {
	if cfg.Repo == "" && cfg.Org == "" {
		cfg.Repo = DevRepo
	}
	cfg.HookID = cmp.Or(cfg.HookID, DevHookID)
	cfg.Token = cmp.Or(cfg.Token, DevToken)
	cfg.RepoID = cmp.Or(cfg.RepoID, DevRepoID)
	cfg.OrgID = cmp.Or(cfg.OrgID, DevOrgID)
	cfg.InstallationID = cmp.Or(cfg.InstallationID, DevInstallationID)
	cfg.ContentType = cmp.Or(cfg.ContentType, ContentTypeForm)
	cfg.InstallationTokenTTL = cmp.Or(cfg.InstallationTokenTTL, InstallationTokenTTLDefault)
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Sim{cfg: cfg, mux: http.NewServeMux(), seq: 1000, redeliveries: map[string]int{}, repoName: cfg.Repo,
		pulls: map[int64]map[string]any{}, rateLimitStatus: http.StatusForbidden, installs: map[int64]*install{}, tokens: map[string]installToken{}, limitedInstalls: map[int64]bool{}}
	base := ""
	switch {
	case cfg.AppID != "":
		if cfg.AppKey == "" {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(fmt.Sprintf("githubsim: generate an App key: %v", err))
			}
			s.cfg.AppKey = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}))
		}
		k, err := github.ParseAppKey(s.cfg.AppKey)
		if err != nil {
			panic(fmt.Sprintf("githubsim: %v", err))
		}
		s.appPub = &k.PublicKey
		base = github.AppHookPath
		s.installs[cfg.InstallationID] = &install{created: cfg.Now().UTC()}
		s.mux.HandleFunc("POST /app/installations/{installation_id}/access_tokens", s.asApp(s.mintToken))
		s.mux.HandleFunc("GET /app/installations/{installation_id}", s.asApp(s.getInstallation))
		s.mux.HandleFunc("GET /app", s.asApp(s.getApp))
		s.mux.HandleFunc("GET /repositories/{repo_id}/installation", s.asApp(s.repoInstallation))
	case cfg.Repo != "":
		base = "/repos/" + cfg.Repo + "/hooks/{hook_id}/deliveries"
	default:
		base = "/orgs/" + cfg.Org + "/hooks/{hook_id}/deliveries"
	}
	s.mux.HandleFunc("GET "+base, s.api(s.list))
	s.mux.HandleFunc("POST "+base+"/{id}/attempts", s.api(s.redeliver))
	s.mux.HandleFunc("GET /repositories/{repo_id}/pulls/{number}", s.pull)
	s.mux.HandleFunc("POST /sim/deliveries", s.simDeliver)
	s.mux.HandleFunc("POST /sim/down", simhttp.Down(s.SetDown))
	return s
}

// Hook is the simulated hook, for a client.
func (s *Sim) Hook() github.Hook {
	if s.cfg.AppID != "" {
		return github.Hook{AppID: s.cfg.AppID, PrivateKey: s.cfg.AppKey}
	}
	return github.Hook{Repo: s.cfg.Repo, Org: s.cfg.Org, HookID: s.cfg.HookID, Token: s.cfg.Token}
}

// ServeHTTP serves the API and the control endpoints.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// SetDown makes deliveries fail without reaching the receiver (status code
// 0, as GitHub records a connection it could not make), or work again.
func (s *Sim) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// Wait waits for redeliveries in flight.
func (s *Sim) Wait() { s.wg.Wait() }

// Redeliveries says how many redeliveries were asked of guid.
func (s *Sim) Redeliveries(guid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redeliveries[guid]
}

// RenameRepo renames (or transfers) the hook's repository to fullName
// ("owner/name"): later deliveries carry the new full_name and the same
// id, as GitHub's do.
// The hook's API paths keep the name it was created under (GitHub
// redirects the old name).
func (s *Sim) RenameRepo(fullName string) {
	s.mu.Lock()
	s.repoName = fullName
	s.mu.Unlock()
}

// Send delivers event with payload now and records the attempt. It returns
// the delivery's guid and the receiver's status (0 when it was not reached).
// A payload object without the hook's owner gets it, as GitHub's
// deliveries always carry it: a repository hook's repository, an
// organization hook's organization, an App's installation.
func (s *Sim) Send(ctx context.Context, event string, payload any) (guid string, status int, err error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return "", 0, fmt.Errorf("githubsim: encode payload: %w", err)
	}
	body, err = s.withOwner(body)
	if err != nil {
		return "", 0, fmt.Errorf("githubsim: encode payload: %w", err)
	}
	guid = newGUID()
	status = s.deliver(ctx, guid, event, body, false)
	return guid, status, nil
}

// withOwner adds the hook's owner to a payload object that lacks it.
func (s *Sim) withOwner(body []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil || doc == nil {
		return body, nil // not an object: sent as given
	}
	s.mu.Lock()
	cfg := s.cfg
	cfg.Repo = s.repoName
	s.mu.Unlock()
	key, owner := "", any(nil)
	switch {
	case cfg.AppID != "":
		key, owner = "installation", map[string]any{"id": cfg.InstallationID}
	case cfg.Repo != "":
		login, name, _ := strings.Cut(cfg.Repo, "/")
		key, owner = "repository", map[string]any{"id": cfg.RepoID, "name": name, "full_name": cfg.Repo,
			"owner": map[string]any{"login": login}}
	default:
		key, owner = "organization", map[string]any{"id": cfg.OrgID, "login": cfg.Org}
	}
	if _, ok := doc[key]; ok {
		return body, nil
	}
	raw, err := json.Marshal(owner)
	if err != nil {
		return nil, err
	}
	doc[key] = raw
	return json.Marshal(doc)
}

// deliver POSTs one attempt and logs it.
func (s *Sim) deliver(ctx context.Context, guid, event string, body []byte, redelivery bool) int {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	status := 0
	if !down && s.cfg.WebhookURL != "" {
		status = s.post(ctx, guid, event, body)
	}
	var action *string
	var a struct {
		Action string `json:"action"`
	}
	if json.Unmarshal(body, &a) == nil && a.Action != "" {
		action = &a.Action
	}
	s.mu.Lock()
	s.seq++
	d := Delivery{Delivery: github.Delivery{ID: s.seq, GUID: guid, DeliveredAt: s.cfg.Now().UTC(), Redelivery: redelivery,
		StatusCode: status, Event: event, Action: action, Status: statusText(status)}, body: body}
	s.log = append(s.log, d)
	s.mu.Unlock()
	return status
}

func statusText(code int) string {
	switch {
	case code == 0:
		return "failed to connect to host"
	case code >= 200 && code < 300:
		return "OK"
	}
	return "Invalid HTTP Response: " + strconv.Itoa(code)
}

// post sends one attempt of the JSON document doc, in the hook's content
// type, signed over the bytes sent.
func (s *Sim) post(ctx context.Context, guid, event string, doc []byte) int {
	body, ct := doc, ContentTypeJSON
	if s.cfg.ContentType == ContentTypeForm {
		body, ct = []byte(url.Values{"payload": {string(doc)}}.Encode()), ContentTypeForm
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return 0
	}
	req.Header.Set("Content-Type", ct)
	req.Header.Set("User-Agent", "GitHub-Hookshot/hookyard-sim")
	req.Header.Set(github.DeliveryHeader, guid)
	req.Header.Set(github.EventHeader, event)
	req.Header.Set("X-GitHub-Hook-ID", strconv.FormatInt(s.cfg.HookID, 10))
	req.Header.Set(github.SignatureHeader, github.Sign(body, s.cfg.Secret))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (s *Sim) api(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.appPub != nil {
			tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if err := checkAppJWT(tok, s.appPub, []string{s.cfg.AppID, s.cfg.AppClientID}, time.Now()); err != nil {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"message": err.Error(),
					"documentation_url": "https://docs.github.com/rest"})
				return
			}
			h(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+s.cfg.Token {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials",
				"documentation_url": "https://docs.github.com/rest"})
			return
		}
		if r.PathValue("hook_id") != strconv.FormatInt(s.cfg.HookID, 10) {
			writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
			return
		}
		h(w, r)
	}
}

// list serves the deliveries newest first, by cursor. The cursor is the id
// of the last delivery of the previous page.
func (s *Sim) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	perPage := 30
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "per_page must be a positive integer"})
			return
		}
		perPage = min(n, 100)
	}
	var after int64 = -1
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"message": "invalid cursor"})
			return
		}
		after = n
	}
	cutoff := s.cfg.Now().Add(-DeliveryRetention)
	s.mu.Lock()
	all := slices.Clone(s.log)
	s.mu.Unlock()
	// A cursor names a delivery of the last 3 days; one GitHub no longer
	// lists is refused with 422 Validation Failed
	// (https://docs.github.com/en/rest/using-the-rest-api/using-pagination-in-the-rest-api),
	// never read as "from the newest".
	if after >= 0 && !slices.ContainsFunc(all, func(d Delivery) bool { return d.ID == after && !d.DeliveredAt.Before(cutoff) }) {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
			"errors":            []map[string]string{{"resource": "HookDelivery", "field": "cursor", "code": "invalid"}},
			"documentation_url": "https://docs.github.com/rest/repos/webhooks#list-deliveries-for-a-repository-webhook"})
		return
	}
	slices.Reverse(all)
	out := []github.Delivery{}
	more := false
	for _, d := range all {
		if d.DeliveredAt.Before(cutoff) || (after >= 0 && d.ID >= after) {
			continue
		}
		if len(out) == perPage {
			more = true
			break
		}
		out = append(out, d.Delivery)
	}
	if more {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		v := u.Query()
		v.Set("cursor", strconv.FormatInt(out[len(out)-1].ID, 10))
		u.RawQuery = v.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, u.String()))
	}
	writeJSON(w, http.StatusOK, out)
}

// redeliver accepts a redelivery (202) and sends it afterwards, as GitHub
// does, with the original's guid.
func (s *Sim) redeliver(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	s.mu.Lock()
	i := slices.IndexFunc(s.log, func(d Delivery) bool { return d.ID == id })
	// Only deliveries of the last 3 days can be redelivered
	// (https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks);
	// GitHub refuses an older one with 422 Validation Failed, the answer
	// the API documents for the attempts endpoint
	// (https://docs.github.com/en/rest/repos/webhooks#redeliver-a-delivery-for-a-repository-webhook).
	expired := i >= 0 && s.log[i].DeliveredAt.Before(s.cfg.Now().Add(-DeliveryRetention))
	var d Delivery
	if i >= 0 && !expired {
		d = s.log[i]
		s.redeliveries[d.GUID]++
	}
	s.mu.Unlock()
	if i < 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found",
			"documentation_url": "https://docs.github.com/rest/repos/webhooks#redeliver-a-delivery-for-a-repository-webhook"})
		return
	}
	if expired {
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed",
			"errors":            []map[string]string{{"resource": "HookDelivery", "code": "custom", "message": "Delivery is too old to redeliver"}},
			"documentation_url": "https://docs.github.com/rest/repos/webhooks#redeliver-a-delivery-for-a-repository-webhook"})
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.deliver(context.Background(), d.GUID, d.Event, d.body, true)
	}()
	writeJSON(w, http.StatusAccepted, map[string]any{})
}

func (s *Sim) simDeliver(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Event   string          `json:"event"`
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&in); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": err.Error()})
		return
	}
	if in.Event == "" {
		in.Event = "ping"
	}
	if len(in.Payload) == 0 {
		in.Payload = json.RawMessage(`{}`)
	}
	guid, status, err := s.Send(r.Context(), in.Event, in.Payload)
	out := map[string]any{"guid": guid, "delivery_status": status}
	if err != nil {
		out["error"] = err.Error()
	}
	writeJSON(w, http.StatusOK, out)
}

func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func writeJSON(w http.ResponseWriter, status int, v any) { simhttp.WriteJSON(w, status, v) }

// checkAppJWT checks an App's token as GitHub does: an RS256 JWT signed by
// the App's key, iss the App's id or client id, not expired, exp at most 10 minutes ahead,
// iat not in the future. The messages are GitHub's.
// errJWTUndecodable is GitHub's answer to a token it cannot read, word for word.
//
//lint:ignore ST1005 GitHub's own message, capital letter included
var errJWTUndecodable = errors.New("A JSON web token could not be decoded")

func checkAppJWT(tok string, pub *rsa.PublicKey, issuers []string, now time.Time) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errJWTUndecodable
	}
	header, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	claims, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return errJWTUndecodable
	}
	var h struct {
		Alg string `json:"alg"`
	}
	if json.Unmarshal(header, &h) != nil || h.Alg != "RS256" {
		return errJWTUndecodable
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
		return errJWTUndecodable
	}
	var c github.AppClaims
	if json.Unmarshal(claims, &c) != nil {
		return errJWTUndecodable
	}
	switch {
	case c.Issuer == "" || !slices.Contains(issuers, c.Issuer):
		return errors.New("'Issuer' claim ('iss') must be the App's id or client id")
	case c.ExpiresAt <= now.Unix():
		return errors.New("'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires")
	case c.ExpiresAt > now.Add(10*time.Minute).Unix():
		return errors.New("'Expiration time' claim ('exp') is too far in the future")
	case c.IssuedAt > now.Unix()+1:
		return errors.New("'Issued at' claim ('iat') must be an Integer representing a time in the past")
	}
	return nil
}

// Backdate moves every delivery d into the past, as if that much time had
// gone by.
func (s *Sim) Backdate(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.log {
		s.log[i].DeliveredAt = s.log[i].DeliveredAt.Add(-d)
	}
}

// SetPull sets pull request number of the repository to state ("open",
// "closed"), merged or not, as GET /repositories/{id}/pulls/{number}
// answers it.
func (s *Sim) SetPull(number int64, state string, merged bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pr := map[string]any{"number": number, "state": state, "merged": merged, "merged_at": nil,
		"base": map[string]any{"repo": map[string]any{"id": s.cfg.RepoID, "full_name": s.repoName}}}
	if merged {
		pr["merged_at"] = s.cfg.Now().UTC().Format(time.RFC3339)
	}
	s.pulls[number] = pr
}

// SetRateLimited spends (or restores) the token's primary rate limit.
func (s *Sim) SetRateLimited(limited bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimited = limited
}

// PullCalls is how many pull request reads reached the simulator.
func (s *Sim) PullCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pullCalls
}

// pull answers GET /repositories/{repo_id}/pulls/{number} as GitHub does
// (https://docs.github.com/en/rest/pulls/pulls#get-a-pull-request), to
// the hook's token or an installation token (tokenAccepted): 401 for a bad
// or expired token; 403 (or 429) with x-ratelimit-remaining: 0 when the primary
// rate limit is spent
// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#exceeding-the-rate-limit);
// 404 for a pull request or repository that does not exist or that the
// token may not see (GitHub does not tell them apart: "Not Found").
func (s *Sim) pull(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.pullCalls++
	limited, pr := s.rateLimited, map[string]any(nil)
	if n, err := strconv.ParseInt(r.PathValue("number"), 10, 64); err == nil && r.PathValue("repo_id") == strconv.FormatInt(s.cfg.RepoID, 10) {
		pr = s.pulls[n]
	}
	s.mu.Unlock()
	inst, ok := s.tokenAccepted(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	limited = limited || s.limitedInstalls[inst]
	s.mu.Unlock()
	if limited {
		s.writeRateLimited(w)
		return
	}
	if pr == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found",
			"documentation_url": "https://docs.github.com/rest/pulls/pulls#get-a-pull-request"})
		return
	}
	writeJSON(w, http.StatusOK, pr)
}
