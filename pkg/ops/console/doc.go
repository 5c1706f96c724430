// Package console serves the operator's console under /console/ on the ops
// address: the overview of what waits and what failed, search, a resource's
// story (explain's timeline), the pending, retrying, dead, parked, actions
// and jobs lists with their replays (and a retrying event's "retry now"),
// and the partitions.
//
// Every page reads a bounded part of an index, whatever the tables hold:
// the overview's counts stop at OverviewCap ("1,000+"; the metrics count
// exactly), a list page reads at most inbox.WaitingScanDefault entries past
// its cursor, a resource's timeline its latest entries.
//
// Pages are rendered on the server (html/template) from assets embedded in
// the binary; the one script (assets/console.js) only follows a job's
// progress. The Content-Security-Policy allows nothing but the console's own
// origin and no inline script. A session is an HttpOnly, SameSite=Strict
// cookie (Secure over TLS) naming a server-side session; every form that
// changes state carries the session's CSRF token and is refused without it.
// What a principal may do is checked by the handler of each route, not by
// the template hiding a button.
//
// It owns no table and no SQL: it reads and replays through the packages
// that own the tables (inbox, projection, action, fence, job) and
// explain.Build, and it never writes a projection.
package console
