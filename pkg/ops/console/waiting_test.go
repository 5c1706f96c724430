package console

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/inbox"
)

// A page's cursor survives its URL whatever the identity holds (a "/" in
// an event id, a space in an account), and a bare time starts at that
// instant.
func TestListCursorSurvivesItsURL(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)
	cur := inbox.Cursor{At: at, Provider: "standard-webhooks", SourceAccount: "a b", Environment: "test", EventID: "msg/1%2F"}
	got, err := parseCursor(formatCursor(cur))
	require.NoError(t, err)
	require.Equal(t, cur, *got)
	got, err = parseCursor("2026-03-04T05:06:07Z")
	require.NoError(t, err)
	require.Equal(t, inbox.Cursor{At: at.Truncate(time.Second)}, *got)
	_, err = parseCursor("2026-03-04T05:06:07Z/a/b")
	require.Error(t, err)
	require.Equal(t, "1,000+", countText(1000, true))
	require.Equal(t, "999", countText(999, false))
	require.Equal(t, "1,234,567", countText(1234567, false))
}
