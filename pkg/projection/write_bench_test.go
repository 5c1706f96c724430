package projection_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
)

// BenchmarkVersionedWrite is the processor's versioned write alone, one
// writer, 16 writes a transaction as the processor's batches send them,
// each applied (a newer version of one of 1,000 resources), with and
// without the change record in the same statement: what the change
// stream costs the write itself, with no other writer on the outbox.
//
//	go test -run '^$' -bench VersionedWrite -benchtime 20000x ./pkg/projection/
func BenchmarkVersionedWrite(b *testing.B) {
	state := []byte(`{"id":"sub_1","status":"active","plan":"` + strings.Repeat("p", 400) + `"}`)
	for _, topic := range []string{"", changesTopic} {
		name := "changes off"
		if topic != "" {
			name = "changes on"
		}
		b.Run(name, func(b *testing.B) {
			s := dbtest.New(b)
			ctx := b.Context()
			const perTx, resources = 16, 1000
			b.ResetTimer()
			for i := 0; i < b.N; i += perTx {
				tx, err := s.Pool.Begin(ctx)
				require.NoError(b, err)
				batch := &pgx.Batch{}
				var changes *projection.Changes
				if topic != "" {
					changes = projection.NewChanges(topic)
				}
				res := make([]projection.Result, perTx)
				for j := range perTx {
					n := i + j
					v := int64(n/resources + 1)
					projection.QueueVersioned(batch, projection.Write{
						Resource: message.Resource{Provider: "chargebee", SourceAccount: "site", Environment: "test", Type: "subscription", ID: fmt.Sprintf("sub_%d", n%resources)},
						Version:  &v, State: state, Status: "active", EventID: fmt.Sprintf("ev_%d", n), Generation: 1, Changes: changes}, &res[j])
				}
				require.NoError(b, tx.SendBatch(ctx, batch).Close())
				require.NoError(b, changes.Insert(ctx, tx))
				require.NoError(b, tx.Commit(ctx))
				for _, r := range res {
					if r.Outcome != projection.Applied {
						b.Fatalf("outcome %q", r.Outcome)
					}
				}
			}
		})
	}
}
