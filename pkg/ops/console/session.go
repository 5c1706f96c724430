package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

// Cookie names.
const (
	sessionCookie = "hookyard_console"
	// loginCookie holds the login form's CSRF token before a session
	// exists (double submit): a page elsewhere cannot log a browser in
	// under its own token.
	loginCookie = "hookyard_console_login"
)

// session is one logged-in browser.
type session struct {
	id        string
	csrf      string
	principal Principal
	expires   time.Time
}

// sessions are kept in the process: a session is valid on the API process
// that created it (run one console process, or route a browser to one).
type sessions struct {
	mu  sync.Mutex
	ttl time.Duration
	m   map[string]*session
	now func() time.Time
}

func newToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func (s *sessions) create(p Principal) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for id, old := range s.m { // expired sessions go when a new one comes
		if now.After(old.expires) {
			delete(s.m, id)
		}
	}
	ss := &session{id: newToken(), csrf: newToken(), principal: p, expires: now.Add(s.ttl)}
	s.m[ss.id] = ss
	return ss
}

func (s *sessions) get(id string) (*session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.m[id]
	if !ok || s.now().After(ss.expires) {
		delete(s.m, id)
		return nil, false
	}
	return ss, true
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// setCookie sets a console cookie: HttpOnly, SameSite=Strict, Secure when
// the request came over TLS (here, or at a proxy that says so in
// X-Forwarded-Proto: a client claiming it falsely only loses its own
// cookie over plain HTTP), limited to the console's path.
func setCookie(c echo.Context, name, value string, maxAge int) {
	c.SetCookie(&http.Cookie{Name: name, Value: value, Path: "/console/", MaxAge: maxAge, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: c.Scheme() == "https"})
}

func sameToken(a, b string) bool {
	return a != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
