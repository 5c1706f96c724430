package inbox_test

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// BenchmarkIntakeStatement measures intake's one statement alone: two
// writers (the receiver's default on two cores), batches of 64 new events
// with 600-byte bodies, and prints Postgres time and WAL per row.
func BenchmarkIntakeStatement(b *testing.B) {
	for _, batch := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) { benchIntake(b, batch) })
	}
}

func benchIntake(b *testing.B, batch int) {
	s := dbtest.NewWithConns(b, 4)
	ctx := b.Context()
	pad := strings.Repeat("x", 540)
	const writers = 2
	var next atomic.Int64
	mkBatch := func() []*inbox.Record {
		recs := make([]*inbox.Record, batch)
		for i := range recs {
			n := next.Add(1)
			r := record(fmt.Sprintf("evt_%012d", n), fmt.Sprintf("sub_%06d", n%10000))
			r.Event.Payload = []byte(`{"id":"` + r.Event.ID + `","pad":"` + pad + `"}`)
			recs[i] = r
		}
		return recs
	}
	var lsn0 string
	require.NoError(b, s.Pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var done atomic.Int64
	rounds := (b.N + batch - 1) / batch
	var claimed atomic.Int64
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for claimed.Add(1) <= int64(rounds) {
				res, err := inbox.Insert(ctx, s.Pool, mkBatch(), time.Now())
				if err != nil {
					b.Error(err)
					return
				}
				done.Add(int64(len(res)))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	var wal float64
	require.NoError(b, s.Pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, lsn0).Scan(&wal))
	rows := float64(done.Load())
	b.ReportMetric(el.Seconds()*1e6/rows, "µs/row")
	b.ReportMetric(rows/el.Seconds(), "rows/s")
	b.ReportMetric(wal/rows, "WAL-B/row")
}

// BenchmarkLoadBodies measures the processor's batch read (ledger rows and
// their bodies, 16 keys a statement) with the body table split into more
// or fewer partitions: each adds a child the statement's plan holds.
func BenchmarkLoadBodies(b *testing.B) {
	for _, parts := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			s := dbtest.NewWithConns(b, 4)
			ctx := b.Context()
			// The migration's partition spans three days from today; add
			// empty ones after it, a day each.
			for i := 1; i < parts; i++ {
				_, err := s.Pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE webhook_inbox_body_x%d PARTITION OF webhook_inbox_body
					FOR VALUES FROM (date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '%d days')
					TO (date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '%d days')`, i, 2+i, 3+i))
				require.NoError(b, err)
			}
			const n, batch = 4096, 16
			keys := fillInbox(b, s.Pool, n, func(int) string { return "sub_1" })
			b.ResetTimer()
			for i := range b.N {
				at := (i * batch) % n
				got, err := inbox.Load(ctx, s.Pool, keys[at:at+batch])
				require.NoError(b, err)
				require.Len(b, got, batch)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/event")
		})
	}
}

// fillInbox stores n pending events (ids evt_000000000 on, resources named
// by sub), in chunks of 1,000, analyzes the inbox and returns their keys.
func fillInbox(b *testing.B, pool *pgxpool.Pool, n int, sub func(i int) string) []inbox.Key {
	keys := make([]inbox.Key, 0, n)
	for i := 0; i < n; i += 1000 {
		recs := make([]*inbox.Record, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			r := record(fmt.Sprintf("evt_%09d", j), sub(j))
			recs = append(recs, r)
			keys = append(keys, key(r.Event.ID))
		}
		_, err := inbox.Insert(b.Context(), pool, recs, time.Now())
		require.NoError(b, err)
	}
	_, err := pool.Exec(b.Context(), `ANALYZE webhook_inbox, webhook_inbox_body`)
	require.NoError(b, err)
	return keys
}
