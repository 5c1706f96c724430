package github

import (
	"cmp"
	"context"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookyard/hookyard/internal/apiguard"
	"github.com/hookyard/hookyard/pkg/provider"
)

// Installation is the resource type of a GitHub App's installation, keyed
// by its id. Only an App's hook projects it: it is read with the App's JWT.
const Installation = "installation"

// installationEvents are the events about an App's installation itself
// (https://docs.github.com/en/webhooks/webhook-events-and-payloads#installation).
var installationEvents = map[string]bool{"installation": true, "installation_repositories": true, "installation_target": true}

// InstallationTokenRenewBefore is how long before its expiry an
// installation token is replaced: GitHub's tokens live an hour
// (https://docs.github.com/en/apps/creating-github-apps/authenticating-with-a-github-app/generating-an-installation-access-token-for-a-github-app),
// and a token handed to a call that is still queued behind the limiter
// must not expire on the way.
const InstallationTokenRenewBefore = 5 * time.Minute

// ErrInstallationToken: GitHub refused to mint an installation token (401,
// 403 or 404): the installation was removed or suspended, or the App's key
// or id is wrong. It wraps the status's own sentinel.
var ErrInstallationToken = errors.New("github app: no installation token")

// app holds one GitHub App's credentials: its key, which signs the JWT of
// the App's own calls (minting tokens, reading installations), and the
// installation tokens it minted, in memory only. Each credential has its
// own limiter and breaker, since GitHub counts the App's calls and each
// installation's apart
// (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#primary-rate-limit-for-github-app-installations).
type app struct {
	id  string
	key *rsa.PrivateKey
	cfg APIConfig
	// guard bounds the calls made with the App's JWT.
	guard *apiguard.Guard
	log   *slog.Logger
	now   func() time.Time

	mu sync.Mutex
	// tokens are the installation tokens by installation id, each minted
	// once however many callers want it at once.
	tokens map[int64]*minting
	// guards bound each installation's calls.
	guards map[int64]*apiguard.Guard
	// repos is the installation of each repository, as GitHub last said,
	// asked once however many callers want it at once.
	repos map[int64]*lookup
}

// lookup is one repository's installation, done once GitHub answered.
type lookup struct {
	done chan struct{}
	id   int64
	err  error
}

// minting is one installation token, done once it is minted (or failed).
type minting struct {
	done    chan struct{}
	token   string
	expires time.Time
	err     error
}

func newApp(id, pemKey string, opts provider.APIOptions) (*app, error) {
	key, err := ParseAppKey(pemKey)
	if err != nil {
		return nil, err
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg := APIConfig{BaseURL: strings.TrimRight(cmp.Or(opts.BaseURL, APIBaseDefault), "/"), Timeout: APITimeoutDefault,
		RatePerSecond: FetchRatePerSecondDefault, Burst: FetchBurstDefault, HTTPClient: http.DefaultClient}
	return &app{id: id, key: key, cfg: cfg, log: log, now: time.Now,
		guard:  apiguard.New(apiguard.Config{Name: "github app " + id, RatePerSecond: cfg.RatePerSecond, Burst: cfg.Burst, Healthy: healthy}),
		tokens: map[int64]*minting{}, guards: map[int64]*apiguard.Guard{}, repos: map[int64]*lookup{}}, nil
}

// asApp sends one call with the App's JWT, under the App's guard.
func (a *app) asApp(ctx context.Context, method, path string, want int) ([]byte, error) {
	var body []byte
	err := a.guard.Do(ctx, method+" "+path, func() error {
		jwt, err := AppJWT(a.key, a.id, a.now())
		if err != nil {
			return err
		}
		body, _, err = request(ctx, a.cfg, method, path, jwt, want)
		return err
	})
	return body, err
}

// installationGuard is installation id's limiter and breaker.
func (a *app) installationGuard(id int64) *apiguard.Guard {
	a.mu.Lock()
	defer a.mu.Unlock()
	g := a.guards[id]
	if g == nil {
		g = apiguard.New(apiguard.Config{Name: "github installation " + strconv.FormatInt(id, 10),
			RatePerSecond: a.cfg.RatePerSecond, Burst: a.cfg.Burst, Healthy: healthy})
		a.guards[id] = g
	}
	return g
}

// token returns a token of installation id valid for at least
// InstallationTokenRenewBefore. Callers that ask while it is being minted
// wait for that one: however many workers ask at once, one is minted.
func (a *app) token(ctx context.Context, id int64) (string, error) {
	a.mu.Lock()
	m := a.tokens[id]
	if m != nil {
		select {
		case <-m.done:
			if m.err == nil && a.now().Before(m.expires.Add(-InstallationTokenRenewBefore)) {
				a.mu.Unlock()
				return m.token, nil
			}
			m = nil // expiring, or failed: mint another
		default:
		}
	}
	if m != nil {
		a.mu.Unlock()
		select {
		case <-m.done:
			// Minted for this call (or failed for it): a failure is not
			// retried by every waiter at once.
			return m.token, m.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	m = &minting{done: make(chan struct{})}
	a.tokens[id] = m
	a.mu.Unlock()
	// Not canceled with this caller: others wait for the same token. The
	// call's timeout still bounds it.
	m.token, m.expires, m.err = a.mint(context.WithoutCancel(ctx), id)
	close(m.done)
	return m.token, m.err
}

// forget drops installation id's token if it is still token (GitHub
// refused it: expired early or revoked), so the next call mints another.
func (a *app) forget(id int64, token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if m := a.tokens[id]; m != nil {
		select {
		case <-m.done:
			if m.token == token {
				delete(a.tokens, id)
			}
		default:
		}
	}
}

// mint asks GitHub for a token of installation id
// (https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app):
// 201 {token, expires_at}. Neither the token nor the JWT is ever logged or
// put in an error.
func (a *app) mint(ctx context.Context, id int64) (string, time.Time, error) {
	p := fmt.Sprintf("/app/installations/%d/access_tokens", id)
	body, err := a.asApp(ctx, http.MethodPost, p, http.StatusCreated)
	if err != nil {
		if errors.Is(err, ErrUnauthorized) || errors.Is(err, ErrNotFound) {
			// 401: the JWT (App id or key) is refused; 403: the
			// installation is suspended; 404: it was removed, or is
			// another App's.
			return "", time.Time{}, fmt.Errorf("%w for installation %d of App %s (installation removed or suspended, or the App's id or key is wrong): %w",
				ErrInstallationToken, id, a.id, err)
		}
		return "", time.Time{}, err
	}
	var doc struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.Token == "" || doc.ExpiresAt.IsZero() {
		return "", time.Time{}, fmt.Errorf("github app: POST %s: unexpected response", p)
	}
	a.log.Info("github installation token minted", "app_id", a.id, "installation_id", id, "expires_at", doc.ExpiresAt)
	return doc.Token, doc.ExpiresAt, nil
}

// installationOf is the installation of the App on repository repo: the
// one GitHub names now (GET /repositories/{id}/installation, the id form
// of GET /repos/{owner}/{repo}/installation,
// https://docs.github.com/en/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app),
// remembered until a call with its token is refused. It is asked of
// GitHub, not read from an event: a fetch serves every event of its
// resource, a reconciliation check has no event, and an App reinstalled
// on the account has a new installation id that older events do not name.
func (a *app) installationOf(ctx context.Context, repo int64) (int64, error) {
	a.mu.Lock()
	l := a.repos[repo]
	if l != nil {
		a.mu.Unlock()
		select {
		case <-l.done:
			return l.id, l.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	l = &lookup{done: make(chan struct{})}
	a.repos[repo] = l
	a.mu.Unlock()
	l.id, l.err = a.askInstallation(context.WithoutCancel(ctx), repo)
	if l.err != nil {
		// Waiters get this answer; later callers ask again.
		a.forgetRepo(repo, l)
	}
	close(l.done)
	return l.id, l.err
}

func (a *app) askInstallation(ctx context.Context, repo int64) (int64, error) {
	body, err := a.asApp(ctx, http.MethodGet, fmt.Sprintf("/repositories/%d/installation", repo), http.StatusOK)
	if err != nil {
		return 0, err
	}
	var doc struct {
		ID int64 `json:"id"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.ID <= 0 {
		return 0, fmt.Errorf("github app: the installation of repository %d: unexpected response", repo)
	}
	return doc.ID, nil
}

// getAsInstallation GETs path of repository repo with the token of the
// App's installation on it, under that installation's guard. A token
// GitHub refuses (401: expired early, or revoked) is replaced and the call
// sent once more; a repository GitHub says the installation cannot see is
// looked up again next time (it may have moved to another installation).
func (a *app) getAsInstallation(ctx context.Context, repo int64, path string) ([]byte, error) {
	id, err := a.installationOf(ctx, repo)
	if err != nil {
		return nil, err
	}
	g := a.installationGuard(id)
	for try := 0; ; try++ {
		tok, err := a.token(ctx, id)
		if err != nil {
			if errors.Is(err, ErrInstallationToken) {
				a.forgetRepo(repo, nil)
			}
			return nil, err
		}
		var body []byte
		err = g.Do(ctx, "GET "+path, func() error {
			var err error
			body, _, err = request(ctx, a.cfg, http.MethodGet, path, tok, http.StatusOK)
			return err
		})
		if statusOf(err) == http.StatusUnauthorized {
			a.forget(id, tok)
			if try == 0 {
				continue
			}
		}
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrUnauthorized) {
			a.forgetRepo(repo, nil)
		}
		return body, err
	}
}

// forgetRepo drops repo's installation if it is still l (nil: whichever).
func (a *app) forgetRepo(repo int64, l *lookup) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if cur := a.repos[repo]; cur != nil && (l == nil || cur == l) {
		delete(a.repos, repo)
	}
}

// fetchInstallation reads installation id with the App's JWT
// (https://docs.github.com/en/rest/apps/apps#get-an-installation-for-the-authenticated-app).
// The status is "suspended" when suspended_at is set (GitHub keeps a
// suspended installation, 200), else "active".
//
// A 404 is a deletion, and only once GitHub has confirmed, in the same
// fetch, that the JWT is this App's (GET /app answers its id): an App sees
// every installation it has, so the 404 cannot mean "not yours to see",
// which is why a 404 elsewhere (a pull request) is never a state; and a
// removed installation is gone for good (a new installation gets a new
// id). A wrong key or App id gives 401 or another App's id, never a
// deletion. Written by fetch order, a tombstone from a 404 that came too
// early is replaced by the next fetch that finds the installation.
func (a *app) fetchInstallation(ctx context.Context, id int64) (provider.Fetched, error) {
	body, err := a.asApp(ctx, http.MethodGet, fmt.Sprintf("/app/installations/%d", id), http.StatusOK)
	if errors.Is(err, ErrNotFound) {
		if err := a.confirmSelf(ctx); err != nil {
			return provider.Fetched{}, fmt.Errorf("installation %d answered 404, unconfirmed: %w", id, err)
		}
		a.mu.Lock()
		delete(a.tokens, id)
		a.mu.Unlock()
		state, _ := json.Marshal(map[string]any{"id": id, "deleted": true})
		return provider.Fetched{State: state, Status: "deleted", Deleted: true}, nil
	}
	if err != nil {
		return provider.Fetched{}, err
	}
	var doc struct {
		ID          int64   `json:"id"`
		SuspendedAt *string `json:"suspended_at"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.ID != id {
		return provider.Fetched{}, errors.New("unexpected response")
	}
	status := "active"
	if doc.SuspendedAt != nil {
		status = "suspended"
	}
	return provider.Fetched{State: body, Status: status}, nil
}

// confirmSelf checks that the JWT authenticates this App: GET /app
// (https://docs.github.com/en/rest/apps/apps#get-the-authenticated-app)
// answers the App's id or client id.
func (a *app) confirmSelf(ctx context.Context) error {
	body, err := a.asApp(ctx, http.MethodGet, "/app", http.StatusOK)
	if err != nil {
		return err
	}
	var doc struct {
		ID       int64  `json:"id"`
		ClientID string `json:"client_id"`
	}
	if json.Unmarshal(body, &doc) != nil || (strconv.FormatInt(doc.ID, 10) != a.id && (doc.ClientID == "" || doc.ClientID != a.id)) {
		return fmt.Errorf("github app: GET /app does not answer App %s", a.id)
	}
	return nil
}
