package console

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// ActionRetryNow is the audit action of a retrying event's "retry now".
const ActionRetryNow = "retry_now"

// OverviewCap is where the overview's counts stop: a page reads at most
// this many entries of each status's index ("1,000+"), in the index's
// order, so from as many heap pages in the worst case; the metrics count
// exactly on each scrape.
const OverviewCap = 1_000

// listFilter reads a list's filters (provider, account, environment,
// type, since) and its cursor (after) from a query or a form.
func (c *Console) listFilter(ec echo.Context, status string) (inbox.ListFilter, url.Values, error) {
	v := url.Values{}
	for _, n := range []string{"provider", "account", "environment", "type", "since"} {
		if s := strings.TrimSpace(ec.FormValue(n)); s != "" {
			v.Set(n, s)
		}
	}
	since, err := parseSince(v.Get("since"), c.cfg.Now())
	if err != nil {
		return inbox.ListFilter{}, v, err
	}
	f := inbox.ListFilter{Status: status, Provider: v.Get("provider"), SourceAccount: v.Get("account"),
		Environment: v.Get("environment"), EventType: v.Get("type"), Since: since, Limit: c.cfg.PageSize}
	if a := ec.QueryParam("after"); a != "" {
		if f.After, err = parseCursor(a); err != nil {
			return f, v, err
		}
	}
	return f, v, nil
}

// formatCursor writes a page's cursor as the after parameter: the index
// key's time, then the event's identity, path-escaped, "/"-separated.
func formatCursor(cur inbox.Cursor) string {
	s := cur.At.UTC().Format(time.RFC3339Nano)
	if cur.EventID == "" {
		return s
	}
	return strings.Join([]string{s, url.PathEscape(cur.Provider), url.PathEscape(cur.SourceAccount),
		url.PathEscape(cur.Environment), url.PathEscape(cur.EventID)}, "/")
}

// parseCursor reads formatCursor's text; a time alone starts at that
// instant, every event of it included.
func parseCursor(s string) (*inbox.Cursor, error) {
	parts := strings.Split(s, "/")
	t, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil || (len(parts) != 1 && len(parts) != 5) {
		return nil, errors.New("after must be an RFC 3339 time, optionally followed by /provider/account/environment/event_id")
	}
	cur := &inbox.Cursor{At: t}
	if len(parts) == 5 {
		id := make([]string, 4)
		for i, p := range parts[1:] {
			if id[i], err = url.PathUnescape(p); err != nil {
				return nil, fmt.Errorf("after: %w", err)
			}
		}
		cur.Provider, cur.SourceAccount, cur.Environment, cur.EventID = id[0], id[1], id[2], id[3]
	}
	return cur, nil
}

// WaitingList is a pending, retrying or dead list page's data.
type WaitingList struct {
	Status string
	// KeyName names the time the list is ordered by.
	KeyName string
	Rows    []inbox.Row
	Links   []string
	// Keys are each row's time in the list's order.
	Keys   []time.Time
	Filter url.Values
	Query  string
	// Next is the next page's URL; Partial says this page read its scan
	// budget before it filled.
	Next    string
	Partial bool
	Scan    int
}

// list reads one page of a status's list: the first page, or the one after
// the query's cursor, each a bounded read of the status's index
// (inbox.ListWaiting).
func (c *Console) list(ec echo.Context, status, path string) (WaitingList, error) {
	f, v, err := c.listFilter(ec, status)
	if err != nil {
		return WaitingList{}, c.refuse(ec, http.StatusBadRequest, err.Error())
	}
	p, err := inbox.ListWaiting(ec.Request().Context(), c.pool, f)
	if err != nil {
		return WaitingList{}, c.internal(ec, err)
	}
	w := WaitingList{Status: status, KeyName: inbox.WaitingKey(status), Rows: p.Rows, Filter: v, Query: v.Encode(),
		Partial: p.Partial, Scan: inbox.WaitingScanDefault}
	for _, r := range p.Rows {
		w.Links = append(w.Links, eventURL(inbox.Key{Provider: r.Provider, SourceAccount: r.SourceAccount, Environment: r.Environment, EventID: r.EventID}))
		w.Keys = append(w.Keys, waitingKey(status, r))
	}
	if p.Next != nil {
		nv := url.Values{}
		for k := range v {
			nv.Set(k, v.Get(k))
		}
		nv.Set("after", formatCursor(*p.Next))
		w.Next = path + "?" + nv.Encode()
	}
	return w, nil
}

// waitingKey is the row's time in its status's order (see inbox.WaitingKey).
func waitingKey(status string, r inbox.Row) time.Time {
	switch {
	case status == "dead":
		return r.ReceivedAt
	case r.NextAttemptAt != nil:
		return *r.NextAttemptAt
	}
	return r.ReceivedAt
}

// waiting serves the pending and retrying lists.
func (c *Console) waiting(status, title string) echo.HandlerFunc {
	return func(ec echo.Context) error {
		w, err := c.list(ec, status, "/console/"+status)
		if w.Status == "" {
			return err
		}
		return c.render(ec, http.StatusOK, "waiting.html", title, w)
	}
}

// retryNow enqueues one retrying event now: the retry it was waiting for,
// attempts and retry window kept (inbox.RetryNow).
func (c *Console) retryNow(ec echo.Context) error {
	k := inbox.Key{Provider: ec.FormValue("provider"), SourceAccount: ec.FormValue("account"),
		Environment: ec.FormValue("environment"), EventID: ec.FormValue("event_id")}
	err := inbox.RetryNow(ec.Request().Context(), c.pool, k)
	switch {
	case errors.Is(err, inbox.ErrNotFound):
		return c.refuse(ec, http.StatusNotFound, "no such event")
	case errors.Is(err, inbox.ErrNotRetrying):
		return c.refuse(ec, http.StatusConflict, "the event is no longer retrying: "+err.Error())
	case errors.Is(err, inbox.ErrPurged):
		return c.refuse(ec, http.StatusConflict, "the event's payload was purged; nothing is left to retry")
	case err != nil:
		return c.internal(ec, err)
	}
	if err := audit.Record(ec.Request().Context(), c.pool, "console:"+sess(ec).principal.Name, ActionRetryNow, k, 1); err != nil {
		return c.internal(ec, err)
	}
	c.log.InfoContext(ec.Request().Context(), "console: retrying event retried now", slog.String("principal", sess(ec).principal.Name),
		slog.String("event_id", k.EventID))
	return ec.Redirect(http.StatusSeeOther, eventURL(k))
}

// Card is one figure of the overview.
type Card struct {
	ID    string
	Count string
	Label string
	Note  string
	URL   string
}

// countText writes n with thousands separators, "+" when capped.
func countText(n int64, capped bool) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if capped {
		s += "+"
	}
	return s
}

// ago writes how long ago t was (or, negative, how long until).
func ago(now, t time.Time) string {
	d := now.Sub(t)
	if d < 0 {
		d = -d
	}
	return d.Round(time.Second).String()
}

// backlogCards are the overview's pending, retrying and dead figures.
func (c *Console) backlogCards(b []inbox.CappedBacklog) []Card {
	now := c.cfg.Now()
	var out []Card
	for _, s := range b {
		card := Card{ID: "backlog-" + s.Status, Count: countText(s.Count, s.Capped), Label: s.Status, URL: "/console/" + s.Status}
		switch {
		case s.First == nil:
		case s.Status == "pending":
			card.Note = "oldest waiting " + ago(now, *s.First)
		case s.Status == "retrying" && s.First.After(now):
			card.Note = "next attempt in " + ago(now, *s.First)
		case s.Status == "retrying":
			card.Note = "next attempt overdue by " + ago(now, *s.First)
		default:
			card.Note = "oldest received " + ago(now, *s.First) + " ago"
		}
		out = append(out, card)
	}
	return out
}
