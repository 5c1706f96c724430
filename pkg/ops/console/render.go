package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"
)

// view is what every page template gets.
type view struct {
	Title     string
	Principal Principal
	CSRF      string
	// CanOperate and CanPayload only shape the page; the routes check the
	// scopes themselves.
	CanOperate bool
	CanPayload bool
	Data       any
}

var funcs = template.FuncMap{
	"ts": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05.000Z")
		case *time.Time:
			if t == nil || t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05.000Z")
		}
		return fmt.Sprint(v)
	},
	"age": func(seconds float64) string {
		if seconds <= 0 {
			return "—"
		}
		return (time.Duration(math.Round(seconds)) * time.Second).String()
	},
	"deref": func(v any) any {
		switch p := v.(type) {
		case *string:
			if p == nil {
				return ""
			}
			return *p
		case *int64:
			if p == nil {
				return ""
			}
			return *p
		}
		return v
	},
	"path":  url.PathEscape,
	"count": countText,
}

func (c *Console) parse() error {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	c.pages = map[string]*template.Template{}
	for _, n := range names {
		base := n[len("templates/"):]
		if base == "layout.html" || base == "list.html" {
			continue // shared by every page: the frame, the lists' filters and pager
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/list.html", n)
		if err != nil {
			return fmt.Errorf("console: parse %s: %w", n, err)
		}
		c.pages[base] = t
	}
	return nil
}

// render executes a page into a buffer first, so a template error is a
// clean 500, not half a page.
func (c *Console) render(ec echo.Context, status int, page, title string, data any) error {
	v := view{Title: title, Data: data}
	if s := sess(ec); s != nil {
		v.Principal, v.CSRF = s.principal, s.csrf
		v.CanOperate, v.CanPayload = s.principal.Scopes.Has(ScopeOperate), s.principal.Scopes.Has(ScopePayload)
	}
	var b bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&b, "layout", v); err != nil {
		c.log.ErrorContext(ec.Request().Context(), "console: render", slog.String("page", page), slog.String("error", err.Error()))
		return ec.String(http.StatusInternalServerError, "console page failed to render")
	}
	return ec.HTMLBlob(status, b.Bytes())
}

// refuse answers an error page.
func (c *Console) refuse(ec echo.Context, status int, msg string) error {
	return c.render(ec, status, "error.html", http.StatusText(status), map[string]any{"Status": status, "Message": msg})
}

// internal logs err and answers 503 without its text (it may name rows).
func (c *Console) internal(ec echo.Context, err error) error {
	c.log.ErrorContext(ec.Request().Context(), "console", slog.String("path", ec.Path()), slog.String("error", err.Error()))
	return c.refuse(ec, http.StatusServiceUnavailable, "the database did not answer; try again")
}
