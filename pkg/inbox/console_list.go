package inbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of the console's lists.
const (
	// WaitingPageDefault is the rows of a page when ListFilter.Limit is 0.
	WaitingPageDefault = 50
	// WaitingScanDefault is how many index entries past its cursor one page
	// reads at most when ListFilter.Scan is 0.
	WaitingScanDefault = 1000
)

// ErrUnknownStatus: the console lists pending, retrying and dead events only.
var ErrUnknownStatus = errors.New("not a listed status (pending, retrying, dead)")

// Cursor is where a page of a list starts: after the event with this key
// (At is the key of the status's index, see WaitingKey) and identity.
type Cursor struct {
	At            time.Time
	Provider      string
	SourceAccount string
	Environment   string
	EventID       string
}

// ListFilter selects unfinished events of one status, a page at a time.
// Every zero filter field matches everything.
type ListFilter struct {
	// Status is pending, retrying or dead.
	Status        string
	Provider      string
	SourceAccount string
	Environment   string
	// EventType is the provider's event type, matched exactly.
	EventType string
	// Since keeps events received at or after it.
	Since time.Time
	// After is where the page starts; nil for the first page.
	After *Cursor
	// Limit is the rows of a page. Defaults to WaitingPageDefault.
	Limit int
	// Scan bounds the index entries one page reads past its cursor (a
	// filter that matches few events fills a page only over several).
	// Defaults to WaitingScanDefault.
	Scan int
}

// WaitingPage is one page of a list.
type WaitingPage struct {
	// Rows are in the order of the status's index (see WaitingKey).
	Rows []Row
	// Next is where the next page starts; nil when the list ends here.
	Next *Cursor
	// Partial: the page read its scan budget before it filled, so fewer
	// rows (perhaps none) than a page are shown while more may follow.
	Partial bool
}

// waitingKeys is, for each listed status, the key of its partial index: the
// order of its list, the only order a plan can read without sorting the
// whole status. A pending event waits since it was (re-)published; a
// retrying one until its next attempt; a dead one since it arrived.
var waitingKeys = map[string]string{
	"pending":  "coalesce(next_attempt_at, received_at)", // webhook_inbox_pending
	"retrying": "next_attempt_at",                        // webhook_inbox_retry_due
	"dead":     "received_at",                            // webhook_inbox_dead
}

// WaitingKey names the time a list of status is ordered by, for the page.
func WaitingKey(status string) string {
	switch status {
	case "pending":
		return "waiting since"
	case "retrying":
		return "next attempt"
	}
	return "received"
}

const waitingColumns = `provider, source_account, environment, event_id, endpoint_id, event_type, resource_type, resource_id,
    resource_version, status, outcome, attempts, next_attempt_at, last_error, received_at, processed_at, first_failed_at`

// waitingSQL is one page of a status's list; %[1]s is the status and %[2]s
// its index key. The scanned CTE reads the status's index only, and
// boundedly: every event at the cursor's own instant (equality on the key),
// then at most $2 entries past it in the index's order. The filters apply
// above it, on what was read (MATERIALIZED is the fence: pushed down, a
// filter on provider lets a planner without statistics AND the status's
// index with the primary key's range of the provider, every row of an
// account). A page whose budget ran out before it filled ends before the
// budget's last instant ("cut"), whose events may not all have been read;
// the next page starts at that instant and reads it whole. The statement
// returns one row even when nothing matched, carrying cut.
const waitingSQL = `
WITH scanned AS MATERIALIZED (
  (SELECT ` + waitingColumns + `, %[2]s AS k FROM webhook_inbox WHERE status = '%[1]s' AND %[2]s = $1)
  UNION ALL
  (SELECT ` + waitingColumns + `, %[2]s AS k FROM webhook_inbox WHERE status = '%[1]s' AND %[2]s > $1
   ORDER BY %[2]s LIMIT $2)
), edge AS (
  SELECT CASE WHEN count(*) FILTER (WHERE k > $1) >= $2 THEN max(k) END AS cut FROM scanned
)
SELECT e.cut, m.* FROM edge e LEFT JOIN LATERAL (
  SELECT ` + waitingColumns + `, k FROM scanned
  WHERE (k > $1 OR (provider, source_account, environment, event_id) > ($3::text, $4::text, $5::text, $6::text))
    AND (e.cut IS NULL OR k < e.cut)
    AND ($7::text = '' OR provider = $7) AND ($8::text = '' OR source_account = $8)
    AND ($9::text = '' OR environment = $9) AND ($10::text = '' OR event_type = $10)
    AND received_at >= $11
  ORDER BY k, provider, source_account, environment, event_id
  LIMIT $12) m ON true`

// sql is the filter's statement and arguments.
func (f ListFilter) sql() (string, []any, error) {
	key, ok := waitingKeys[f.Status]
	if !ok {
		return "", nil, fmt.Errorf("list %q events: %w", f.Status, ErrUnknownStatus)
	}
	c := Cursor{}
	if f.After != nil {
		c = *f.After
	}
	// A dead event's key is its arrival: the list starts at since.
	if f.Status == "dead" && c.At.Before(f.Since) {
		c = Cursor{At: f.Since}
	}
	limit := cmp.Or(f.Limit, WaitingPageDefault)
	return fmt.Sprintf(waitingSQL, f.Status, key), []any{c.At, cmp.Or(f.Scan, WaitingScanDefault),
		c.Provider, c.SourceAccount, c.Environment, c.EventID,
		f.Provider, f.SourceAccount, f.Environment, f.EventType, f.Since, limit + 1}, nil
}

// ListWaiting reads one page of the events of f.Status that f selects, in
// the order of the status's index, without payloads. A page reads at most
// f.Scan index entries past its cursor (plus the events at the cursor's own
// instant), whatever the inbox's size and the filter's selectivity.
func ListWaiting(ctx context.Context, pool *pgxpool.Pool, f ListFilter) (WaitingPage, error) {
	sql, args, err := f.sql()
	if err != nil {
		return WaitingPage{}, err
	}
	var cut *time.Time
	type listed struct {
		row Row
		key time.Time
	}
	var got []*listed
	err = consoleRead(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		got, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (*listed, error) {
			var (
				provider, account, env, id, endpoint, typ, rtype, rid, status *string
				attempts                                                      *int
				received, key                                                 *time.Time
				r                                                             Row
			)
			err := row.Scan(&cut, &provider, &account, &env, &id, &endpoint, &typ, &rtype, &rid, &r.Version, &status, &r.Outcome,
				&attempts, &r.NextAttemptAt, &r.LastError, &received, &r.ProcessedAt, &r.FirstFailedAt, &key)
			if err != nil || id == nil {
				return nil, err // nothing matched: the row carries cut only
			}
			r.Provider, r.SourceAccount, r.Environment, r.EventID, r.EndpointID = *provider, *account, *env, *id, *endpoint
			r.EventType, r.ResourceType, r.ResourceID, r.Status, r.Attempts, r.ReceivedAt = *typ, *rtype, *rid, *status, *attempts, *received
			return &listed{row: r, key: *key}, nil
		})
		return err
	})
	if err != nil {
		return WaitingPage{}, fmt.Errorf("list %s events: %w", f.Status, err)
	}
	limit := cmp.Or(f.Limit, WaitingPageDefault)
	var p WaitingPage
	for _, l := range got {
		if l != nil && len(p.Rows) < limit {
			p.Rows = append(p.Rows, l.row)
		}
	}
	switch {
	case len(got) > limit:
		last := got[limit-1]
		p.Next = &Cursor{At: last.key, Provider: last.row.Provider, SourceAccount: last.row.SourceAccount,
			Environment: last.row.Environment, EventID: last.row.EventID}
	case cut != nil:
		p.Next, p.Partial = &Cursor{At: *cut}, true
	}
	return p, nil
}
