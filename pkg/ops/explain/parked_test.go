package explain_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/explain"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
)

// An equal-version conflict is visible where the operator looks: the
// projection line says it is parked and why (not "a version gap" for every
// cause), and the decision line says the first snapshot was kept and the
// projection parked. Fails if explain hides the reason or the parking.
func TestExplainShowsConflictAndWhyTheProjectionIsParked(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	r := message.Resource{Provider: provider.Chargebee, SourceAccount: "site", Environment: "test", Type: "subscription", ID: "sub_conf"}
	apply := func(eventID, status string) projection.Result {
		t.Helper()
		v := int64(9)
		w := projection.Write{Resource: r, Version: &v, State: []byte(`{"status":"` + status + `"}`), Status: status, EventID: eventID, Generation: 1}
		var res projection.Result
		require.NoError(t, pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			projection.QueueVersioned(b, w, &res)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			b = &pgx.Batch{}
			prev := res.Previous
			projection.QueueHistory(b, []projection.HistoryEntry{{Resource: r, EventID: eventID, Outcome: res.Outcome,
				Version: &v, Status: status, Previous: &prev, Generation: 1}})
			return tx.SendBatch(ctx, b).Close()
		}))
		return res
	}
	require.Equal(t, projection.Applied, apply("ev_a", "active").Outcome)
	require.Equal(t, projection.Conflict, apply("ev_b", "past_due").Outcome)

	tl, err := explain.Build(ctx, s.Pool, r, explain.Options{})
	require.NoError(t, err)
	require.NotNil(t, tl.Projection)
	require.True(t, tl.Projection.NeedsReconcile)
	require.Contains(t, tl.Projection.NeedsReconcileReason, "version conflict")
	var buf bytes.Buffer
	require.NoError(t, tl.WriteText(&buf))
	text := buf.String()
	require.Contains(t, text, "PARKED: version conflict: another snapshot of v9 (event ev_b)")
	require.NotContains(t, text, "version gap")
	require.Contains(t, text, "first snapshot of this version kept (active); projection parked for reconciliation")
}
