package explain_test

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/ops/explain"
	"github.com/hookyard/hookyard/pkg/projection"
)

// Ids, types, statuses and errors come from providers' bodies (or whoever
// holds an endpoint's secret). Printed raw, "\x1b[2J" clears the
// operator's terminal and a newline forges a timeline line; the text
// output escapes every character that is not printable, and keeps one
// line per entry.
func TestExplainTextEscapesNonPrintableProviderData(t *testing.T) {
	t.Parallel()
	const evil = "ev\x1b[2J\x1b]0;pwned\x07\r\nFORGED\u202e\x00\xff"
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := int64(1)
	prev := evil
	tl := explain.Timeline{
		Key:        "chargebee/site/test/subscription/" + evil,
		Projection: &projection.Projection{Status: evil, Version: &v, SourceEventID: evil, NeedsReconcile: true, NeedsReconcileReason: evil},
		Access:     &access.Decision{Reason: evil},
		Divergences: []projection.Divergence{{Kind: evil, ProjectionSaid: &prev, ProviderSaid: evil,
			FirstSeenAt: at, LastSeenAt: at}},
		Entries: []explain.Entry{
			{At: at, Kind: explain.KindReceived, EventID: evil, EventType: evil, EventStatus: evil, EventOutcome: evil, LastError: evil},
			{At: at, Kind: explain.KindDecision, EventID: evil, Outcome: projection.Applied, Status: evil, PreviousStatus: &prev},
			{At: at, Kind: explain.KindFetch, EventID: evil, Result: evil, Detail: evil},
		},
		Actions: []explain.ActionEntry{{Action: action.Action{Key: action.Key{Kind: evil, SubjectID: evil}, Status: evil,
			IdempotencyKey: evil, LastError: evil}, Waiting: evil}},
	}
	var buf bytes.Buffer
	require.NoError(t, tl.WriteText(&buf))
	out := buf.String()
	for _, r := range out {
		require.True(t, r == '\n' || unicode.IsGraphic(r), "non-printable %U in:\n%s", r, out)
	}
	require.NotContains(t, out, "\nFORGED", "a value must not start a line of its own")
	require.Contains(t, out, `ev\x1b[2J`, "escaped, still readable")
	require.Len(t, strings.Split(strings.TrimSpace(out), "\n"), 12, "one line per row:\n%s", out)
}
