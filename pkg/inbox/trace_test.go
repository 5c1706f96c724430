package inbox_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
)

// The trace context of a webhook's intake rides in its outbox message, and
// stays on its inbox row so that a replay (built in SQL, long after the
// first outbox row is gone) carries it too; an untraced intake stores none.
// This package installs no tracer provider: with the no-op one, intake
// passes the caller's context through unchanged. Fails if the message or
// the re-enqueued message drops the traceparent.
func TestIntakeKeepsTheTraceContextForTheOutboxAndForReplays(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := t.Context()
	c := inbox.NewCommitter(s.Pool, slog.New(slog.NewTextHandler(io.Discard, nil)), inbox.CommitterConfig{})
	t.Cleanup(c.Stop)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 1}, SpanID: trace.SpanID{0x1c, 2},
		TraceFlags: trace.FlagsSampled, Remote: true})
	const want = "00-4b010000000000000000000000000000-1c02000000000000-01"

	_, err := c.Submit(trace.ContextWithRemoteSpanContext(ctx, sc), record("evt_traced", "sub_traced"))
	require.NoError(t, err)
	_, err = c.Submit(ctx, record("evt_untraced", "sub_untraced"))
	require.NoError(t, err)

	msgOf := func(eventID string) message.Message {
		var raw []byte
		require.NoError(t, s.Pool.QueryRow(ctx, `SELECT message::text FROM outbox WHERE message::jsonb->>'event_id' = $1 ORDER BY id DESC LIMIT 1`, eventID).Scan(&raw))
		m, err := message.Decode(raw)
		require.NoError(t, err)
		return m
	}
	require.Equal(t, want, msgOf("evt_traced").TraceParent)
	require.Empty(t, msgOf("evt_untraced").TraceParent)
	var raw json.RawMessage
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT message::text FROM outbox WHERE message::jsonb->>'event_id' = 'evt_untraced'`).Scan(&raw))
	require.NotContains(t, string(raw), "traceparent", "an untraced message carries no trace field")

	for _, id := range []string{"evt_traced", "evt_untraced"} {
		n, err := inbox.Replay(ctx, s.Pool, inbox.Key{Provider: endpoint.Provider, SourceAccount: endpoint.SourceAccount,
			Environment: endpoint.Environment, EventID: id})
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	}
	replayed := msgOf("evt_traced")
	require.Equal(t, message.ReasonReplay, replayed.Reason)
	require.Equal(t, want, replayed.TraceParent)
	untraced := msgOf("evt_untraced")
	require.Equal(t, message.ReasonReplay, untraced.Reason)
	require.Empty(t, untraced.TraceParent)
}
