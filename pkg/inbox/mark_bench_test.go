package inbox_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/inbox"
)

// BenchmarkMarks measures the processor's marks alone: two workers, each
// marking its own pending events processed in batches of 3 (the
// processor's mean batch at 1,000/s), one transaction a batch, on a ledger
// of 20,000 rows; it prints wall time, the CPU of the pool's server
// processes (from /proc: Postgres on this machine) and WAL per mark.
func BenchmarkMarks(b *testing.B) {
	s := dbtest.NewWithConns(b, 4)
	ctx := b.Context()
	const fill, batch, workers = 20_000, 3, 2
	n := max(b.N, 3*batch*workers)
	keys := fillInbox(b, s.Pool, fill+n, func(i int) string { return fmt.Sprintf("sub_%06d", i%10000) })
	keys = keys[fill:]
	var lsn0 string
	require.NoError(b, s.Pool.QueryRow(ctx, `SELECT pg_current_wal_lsn()::text`).Scan(&lsn0))
	pids := backendPIDs(b, s.Pool)
	cpu0 := procCPU(pids)
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				at := int(next.Add(batch)) - batch
				if at >= b.N {
					return
				}
				marks := make([]inbox.Mark, 0, batch)
				for _, k := range keys[at:min(at+batch, b.N)] {
					marks = append(marks, inbox.Mark{Key: k, Status: inbox.StatusProcessed, Outcome: "applied", Attempts: 1})
				}
				err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
					q := &pgx.Batch{}
					inbox.QueueMarks(q, marks)
					return tx.SendBatch(ctx, q).Close()
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	b.StopTimer()
	if cpu0 >= 0 {
		b.ReportMetric(float64((procCPU(pids)-cpu0).Microseconds())/float64(b.N), "PG-CPU-µs/mark")
	}
	var wal float64
	require.NoError(b, s.Pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)`, lsn0).Scan(&wal))
	var marked int
	require.NoError(b, s.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE status = 'processed'`).Scan(&marked))
	require.Equal(b, b.N, marked, "every mark applied")
	b.ReportMetric(el.Seconds()*1e6/float64(b.N), "µs/mark")
	b.ReportMetric(wal/float64(b.N), "WAL-B/mark")
}

// backendPIDs opens every connection of pool and returns their server
// processes.
func backendPIDs(b *testing.B, pool *pgxpool.Pool) []int {
	var conns []*pgxpool.Conn
	var pids []int
	for range pool.Config().MaxConns {
		c, err := pool.Acquire(b.Context())
		require.NoError(b, err)
		conns = append(conns, c)
		var pid int
		require.NoError(b, c.QueryRow(b.Context(), `SELECT pg_backend_pid()`).Scan(&pid))
		pids = append(pids, pid)
	}
	for _, c := range conns {
		c.Release()
	}
	return pids
}

// procCPU is the user and system CPU time of the processes pids, from
// /proc (the server on this machine); -1 when one cannot be read.
func procCPU(pids []int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return -1
		}
		// Fields after the command's closing parenthesis; utime and
		// stime are the 14th and 15th of the line.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		for _, i := range []int{11, 12} {
			n, err := strconv.ParseInt(f[i], 10, 64)
			if err != nil {
				return -1
			}
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
