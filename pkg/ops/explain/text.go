package explain

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hookyard/hookyard/pkg/projection"
)

const timeLayout = "2006-01-02 15:04:05.000"

// WriteText writes the timeline as plain text: the projection and access
// decision, then one line per entry, oldest first, times in UTC.
func (t Timeline) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row(tw, "resource", t.Key)
	if p := t.Projection; p != nil {
		parts := []string{projection.Label(p.Status, p.Deleted)}
		if p.Version != nil {
			parts = append(parts, "version "+strconv.FormatInt(*p.Version, 10))
		}
		if p.SourceEventID != "" {
			parts = append(parts, "from event "+p.SourceEventID)
		}
		parts = append(parts, "observed "+ts(p.ObservedAt), "updated "+ts(p.UpdatedAt),
			"fence generation "+strconv.FormatInt(p.Generation, 10))
		if p.NeedsReconcile {
			parked := "PARKED: " + cmp.Or(p.NeedsReconcileReason, "needs reconcile")
			if p.ParkedAt != nil {
				parked += " (since " + ts(*p.ParkedAt) + ")"
			}
			if p.ReconcileCheckedAt != nil {
				parked += "; check sent " + ts(*p.ReconcileCheckedAt)
			} else {
				parked += "; no check sent yet"
			}
			parts = append(parts, parked)
		}
		row(tw, "projection", strings.Join(parts, " · "))
	} else {
		row(tw, "projection", "none")
	}
	if d := t.Access; d != nil {
		line := "no"
		if d.Access {
			line = "YES"
		}
		line += " — " + d.Reason
		if d.Until != nil {
			line += " until " + ts(*d.Until)
		}
		row(tw, "access", line)
	}
	for _, d := range t.Divergences {
		state := "open, last seen " + ts(d.LastSeenAt)
		if d.ResolvedAt != nil {
			state = "resolved " + ts(d.ResolvedAt.UTC())
		}
		said := "none"
		if d.ProjectionSaid != nil {
			said = *d.ProjectionSaid
		}
		row(tw, "divergence", fmt.Sprintf("%s: projection said %s, provider said %s · first seen %s · %s",
			d.Kind, said, d.ProviderSaid, ts(d.FirstSeenAt), state))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(t.Entries) == 0 {
		fmt.Fprintln(w, "no events, decisions, fetches or checks recorded for this resource")
	} else {
		if t.Truncated {
			fmt.Fprintln(w, "(older entries not shown; raise -limit)")
		}
		tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TIME (UTC)\tWHAT\tEVENT\tDETAIL")
		for _, e := range t.Entries {
			row(tw, ts(e.At), e.what(), cmp.Or(e.EventID, "-"), e.detail())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return t.writeActions(w)
}

// observation is what follows the last "@" of a transition's subject: the
// version (v3), fetch sequence number (f12), or both.
func observation(subject string) string {
	if i := strings.LastIndexByte(subject, '@'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}

// writeActions lists the external actions about the resource, newest first.
func (t Timeline) writeActions(w io.Writer) error {
	if len(t.Actions) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tSTATUS\tIDEMPOTENCY KEY\tDETAIL")
	for _, a := range t.Actions {
		var parts []string
		if a.Attempts > 0 {
			parts = append(parts, fmt.Sprintf("%d attempt(s)", a.Attempts))
		}
		switch {
		case a.Waiting != "":
			parts = append(parts, a.Waiting)
		case a.DoneAt != nil:
			parts = append(parts, a.Status+" "+ts(*a.DoneAt))
		case a.NextAttemptAt != nil && a.Status == "sending":
			parts = append(parts, "in flight, lease until "+ts(*a.NextAttemptAt))
		case a.NextAttemptAt != nil:
			parts = append(parts, "next attempt "+ts(*a.NextAttemptAt))
		}
		if a.LastError != "" {
			parts = append(parts, "last error: "+a.LastError)
		}
		if a.Cause == CauseTransition || a.Cause == CauseChange {
			parts = append([]string{"caused by " + a.Cause + " " + observation(a.SubjectID)}, parts...)
		}
		row(tw, a.Kind+" "+a.SubjectID, a.Status, a.IdempotencyKey, strings.Join(parts, " · "))
	}
	return tw.Flush()
}

// row writes one line of tab-separated cells, each escaped: ids, types,
// statuses and errors come from providers' bodies, and printed raw an
// escape sequence would drive the operator's terminal (clear the screen,
// retitle the window) and a newline or tab would forge lines and columns.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, printable(c))
	}
	io.WriteString(w, "\n")
}

// printable returns s unchanged when every rune of it is graphic (spaces
// included), else with Go escapes (\x1b, \n, \u202e, \xff for a byte
// that is not UTF-8) for the others.
func printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsGraphic(r) {
			q := strconv.QuoteToGraphic(s)
			return q[1 : len(q)-1]
		}
	}
	return s
}

func ts(t time.Time) string { return t.UTC().Format(timeLayout) }

// human rounds d to what a person compares: milliseconds under a second,
// days past two.
func human(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd%dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
}

func (e Entry) what() string {
	switch e.Kind {
	case KindReceived:
		return "received"
	case KindFetch:
		return "fetch " + e.Result
	case KindReconcile:
		return "reconcile " + cmp.Or(e.Finding, cmp.Or(e.Result, e.Outcome))
	}
	return e.Outcome
}

func (e Entry) version() string {
	if e.Version == nil {
		return ""
	}
	return "v" + strconv.FormatInt(*e.Version, 10)
}

func (e Entry) previous() string {
	if e.PreviousStatus == nil {
		return "?"
	}
	return cmp.Or(*e.PreviousStatus, "(none)")
}

func (e Entry) detail() string {
	var parts []string
	add := func(s string) {
		if s != "" {
			parts = append(parts, s)
		}
	}
	add(e.EventType)
	state := projection.Label(e.Status, e.Deleted)
	switch {
	case e.Kind == KindReceived:
		add(e.version())
		if e.ProviderTime != nil {
			pt := "provider time " + ts(*e.ProviderTime)
			if e.ReceivedAt != nil {
				if d := e.ReceivedAt.Sub(*e.ProviderTime); d >= 0 {
					pt += " (" + human(d) + " before arrival)"
				} else {
					pt += " (" + human(-d) + " after arrival: clocks differ)"
				}
			}
			add(pt)
		} else {
			add("provider time unknown")
		}
		now := "now " + e.EventStatus
		if e.EventOutcome != "" {
			now += " (" + e.EventOutcome + ")"
		}
		if e.Attempts > 0 {
			now += fmt.Sprintf(", %d attempt(s)", e.Attempts)
		}
		if e.NextAttemptAt != nil && e.EventStatus == "retrying" {
			now += ", next " + ts(*e.NextAttemptAt)
		}
		if e.LastError != "" {
			now += ", last error: " + e.LastError
		}
		add(now)
	case e.Kind == KindDecision:
		add(e.version())
		switch e.Outcome {
		case projection.Applied:
			add(e.previous() + " → " + state)
		case projection.Stale:
			add(state + " is older than the projection (" + e.previous() + "); not applied")
		case projection.Duplicate:
			add("same version and content as the projection; nothing to do")
		case projection.Conflict:
			add("same version as the projection, other content; first snapshot of this version kept (" + e.previous() +
				"); projection parked for reconciliation")
		case projection.Unordered:
			add("the projection was fetched from the provider (no version) and cannot be ordered against a snapshot; fetched state kept (" +
				e.previous() + "); projection parked for a check")
		case projection.Gap:
			add("a version is missing before this one; parked until it arrives")
		case projection.Fenced:
			add("write refused, the partition was taken over; its new owner handles the event")
			add(e.Detail)
		default:
			add(cmp.Or(e.Detail, "recorded; no projection change"))
		}
	case e.Result == FetchSuccess && e.Kind == KindReconcile:
		add(cmp.Or(e.Detail, "provider has "+state+"; projection had "+e.previous()))
	case e.Result == FetchSuccess:
		add("provider has " + state + "; written: " + e.previous() + " → " + state)
	default:
		add(e.Detail)
	}
	return strings.Join(parts, " · ")
}
