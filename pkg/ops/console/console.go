package console

import (
	"cmp"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/ops/job"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Defaults of Config.
const (
	SessionTTLDefault = 12 * time.Hour
	PageSizeDefault   = 50
)

// CSP is the console's Content-Security-Policy: its own origin only, no
// inline script or style, no framing, forms only to itself.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"

// Scope is one (provider, source account, environment) the endpoints
// receive for: search looks an id up in each.
type Scope struct {
	Provider      string
	SourceAccount string
	Environment   string
}

// Config configures the console.
type Config struct {
	// Auth says whom a login token belongs to. Required.
	Auth Authenticator
	// Jobs runs the replays the console starts (the ops API's runner).
	// Required.
	Jobs *job.Runner
	// Scopes are where search looks an event id up (the endpoints'
	// provider, account and environment). Defaults to none: events are
	// then found by full key (provider/account/environment/event_id) only.
	Scopes []Scope
	// Policy decides access on the resource page.
	Policy access.Policy
	// ActionsWaiting says why actions of a kind are not sent (explain).
	ActionsWaiting map[string]string
	// Brokers, Topic and Group locate the consumer group whose lag the
	// overview and the partitions page show. Defaults to none: no lag shown.
	Brokers []string
	Topic   string
	Group   string
	// PageSize is the rows per list page. Defaults to PageSizeDefault.
	PageSize int
	// SessionTTL is how long a login lasts. Defaults to SessionTTLDefault.
	SessionTTL time.Duration
	// Now is the clock. Defaults to time.Now.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	c.PageSize = cmp.Or(c.PageSize, PageSizeDefault)
	c.SessionTTL = cmp.Or(c.SessionTTL, SessionTTLDefault)
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	if c.Auth == nil {
		return errors.New("console: Auth is required")
	}
	if c.Jobs == nil {
		return errors.New("console: Jobs is required")
	}
	return nil
}

// Console serves /console/.
type Console struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	cfg      Config
	sessions *sessions
	pages    map[string]*template.Template
	kafka    *kgo.Client // nil without brokers
}

// Mount adds the console's routes under /console/ to e (the ops API's
// echo). Close the returned console when e stops.
func Mount(e *echo.Echo, pool *pgxpool.Pool, log *slog.Logger, cfg Config) (*Console, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Console{pool: pool, log: log.With(slog.String("service", "console")), cfg: cfg,
		sessions: &sessions{ttl: cfg.SessionTTL, m: map[string]*session{}, now: cfg.Now}}
	if err := c.parse(); err != nil {
		return nil, err
	}
	if len(cfg.Brokers) > 0 && cfg.Topic != "" && cfg.Group != "" {
		cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...))
		if err != nil {
			return nil, fmt.Errorf("console: kafka client: %w", err)
		}
		c.kafka = cl
	}
	assets, err := fs.Sub(assetFS, "assets")
	if err != nil {
		return nil, err
	}
	e.GET("/console", func(ec echo.Context) error { return ec.Redirect(http.StatusFound, "/console/") })
	g := e.Group("/console", c.headers)
	g.GET("/assets/*", echo.WrapHandler(http.StripPrefix("/console/assets/", http.FileServer(http.FS(assets)))))
	g.GET("/login", c.loginPage)
	g.POST("/login", c.login)
	in := g.Group("", c.requireSession)
	in.POST("/logout", c.logout, c.csrf)
	read := in.Group("", c.require(ScopeRead))
	read.GET("/", c.overview)
	read.GET("/search", c.search)
	read.GET("/resource/:provider/:account/:environment/:type/:id", c.resource)
	read.GET("/event/:provider/:account/:environment/:event_id", c.event)
	read.GET("/pending", c.waiting("pending", "Pending events"))
	read.GET("/retrying", c.waiting("retrying", "Retrying events"))
	read.GET("/dead", c.dead)
	read.GET("/parked", c.parked)
	read.GET("/actions", c.actions)
	read.GET("/jobs", c.jobs)
	read.GET("/jobs/:id", c.job)
	read.GET("/jobs/:id/progress", c.jobProgress)
	read.GET("/partitions", c.partitions)
	op := in.Group("", c.require(ScopeOperate))
	op.GET("/dead/replay", c.deadEstimate)
	op.POST("/dead/replay", c.deadReplay, c.csrf)
	op.POST("/dead/replay-one", c.deadReplayOne, c.csrf)
	op.POST("/retrying/retry-now", c.retryNow, c.csrf)
	op.POST("/jobs/:id/cancel", c.cancelJob, c.csrf)
	op.POST("/partitions/replay", c.partitionReplay, c.csrf)
	return c, nil
}

// Close releases the console's Kafka client.
func (c *Console) Close() {
	if c.kafka != nil {
		c.kafka.Close()
	}
}

// headers sets the security headers of every console answer.
func (c *Console) headers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		h := ec.Response().Header()
		h.Set("Content-Security-Policy", CSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		if !strings.HasPrefix(ec.Request().URL.Path, "/console/assets/") {
			h.Set("Cache-Control", "no-store")
		}
		return next(ec)
	}
}

func (c *Console) requireSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		ck, err := ec.Cookie(sessionCookie)
		if err == nil {
			if s, ok := c.sessions.get(ck.Value); ok {
				ec.Set("session", s)
				return next(ec)
			}
		}
		if ec.Request().Method != http.MethodGet {
			return c.refuse(ec, http.StatusUnauthorized, "log in first")
		}
		return ec.Redirect(http.StatusSeeOther, "/console/login")
	}
}

func sess(ec echo.Context) *session {
	s, _ := ec.Get("session").(*session)
	return s
}

// require refuses a principal without scope, whatever the page showed it.
func (c *Console) require(scope string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ec echo.Context) error {
			s := sess(ec)
			if s == nil || !s.principal.Scopes.Has(scope) {
				name := ""
				if s != nil {
					name = s.principal.Name
				}
				c.log.WarnContext(ec.Request().Context(), "console: scope refused", slog.String("principal", name),
					slog.String("scope", scope), slog.String("path", ec.Path()))
				return c.refuse(ec, http.StatusForbidden, "your token does not have the "+scope+" scope")
			}
			return next(ec)
		}
	}
}

// csrf refuses a state-changing form without the session's token.
func (c *Console) csrf(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		if !sameToken(ec.FormValue("csrf"), sess(ec).csrf) {
			c.log.WarnContext(ec.Request().Context(), "console: csrf token missing or wrong", slog.String("path", ec.Path()))
			return c.refuse(ec, http.StatusForbidden, "the form's CSRF token is missing or wrong; reload the page")
		}
		return next(ec)
	}
}

func (c *Console) loginPage(ec echo.Context) error {
	tok := newToken()
	setCookie(ec, loginCookie, tok, 600)
	return c.render(ec, http.StatusOK, "login.html", "Log in", map[string]any{"LoginCSRF": tok})
}

func (c *Console) login(ec echo.Context) error {
	ck, err := ec.Cookie(loginCookie)
	if err != nil || !sameToken(ec.FormValue("csrf"), ck.Value) {
		return c.refuse(ec, http.StatusForbidden, "the login form's CSRF token is missing or wrong; reload the page")
	}
	p, ok := c.cfg.Auth.Authenticate(ec.FormValue("token"))
	if !ok {
		c.log.WarnContext(ec.Request().Context(), "console: login refused")
		tok := newToken()
		setCookie(ec, loginCookie, tok, 600)
		return c.render(ec, http.StatusUnauthorized, "login.html", "Log in", map[string]any{"LoginCSRF": tok, "Error": "unknown token"})
	}
	s := c.sessions.create(p)
	setCookie(ec, loginCookie, "", -1)
	setCookie(ec, sessionCookie, s.id, int(c.cfg.SessionTTL.Seconds()))
	c.log.InfoContext(ec.Request().Context(), "console: login", slog.String("principal", p.Name))
	return ec.Redirect(http.StatusSeeOther, "/console/")
}

func (c *Console) logout(ec echo.Context) error {
	c.sessions.drop(sess(ec).id)
	setCookie(ec, sessionCookie, "", -1)
	return ec.Redirect(http.StatusSeeOther, "/console/login")
}
