package main

// What the pipeline section reads beside its own traffic: sequential scans,
// the services' Postgres connections, their metrics and CPU, and the Kafka
// records it taps to time each hop.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// seqScans reads, per table, the rows sequential scans have read so far: a
// plan that scans a growing table shows here first. The statistics
// collector reports with a delay of up to a second (PGSTAT_MIN_INTERVAL),
// which the drain covers.
func (p *pipeline) seqScans(ctx context.Context) (map[string]int64, error) {
	// A partitioned table's scans are its partitions', summed under its name.
	rows, err := p.pool.Query(ctx, `
SELECT r.relname, sum(coalesce(s.seq_tup_read, 0))::bigint
FROM pg_stat_user_tables s JOIN pg_class r ON r.oid = coalesce(pg_partition_root(s.relid), s.relid)
WHERE r.relname = ANY($1) GROUP BY r.relname`, pipeTables)
	if err != nil {
		return nil, fmt.Errorf("read seq scans: %w", err)
	}
	out := map[string]int64{}
	for rows.Next() {
		var t string
		var n int64
		if err := rows.Scan(&t, &n); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read seq scans: %w", err)
		}
		out[t] = n
	}
	return out, rows.Err()
}

// backendSample sums what pg_stat_activity showed of the services'
// connections to the section's database over n samples: running a query
// (active), running one or holding a transaction open (busy), and the most
// connections open at once.
type backendSample struct {
	n, active, busy, maxOpen int64
	pings                    []time.Duration // SELECT 1 round trips
}

// sampleBackends looks at pg_stat_activity every 20 ms until ctx ends: how
// much of `hookyard dev`'s one pool (24 conns) its services keep busy.
func (p *pipeline) sampleBackends(ctx context.Context) backendSample {
	var s backendSample
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return s
		case <-t.C:
		}
		t0 := time.Now()
		if _, err := p.pool.Exec(ctx, `SELECT 1`); err == nil {
			s.pings = append(s.pings, time.Since(t0))
		}
		var active, busy, open int64
		err := p.pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE state = 'active'), count(*) FILTER (WHERE state = 'active' OR state LIKE 'idle in transaction%'), count(*)
FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
  AND application_name NOT LIKE 'hookyard-bench%'`).Scan(&active, &busy, &open)
		if err != nil {
			continue
		}
		s.n++
		s.active += active
		s.busy += busy
		s.maxOpen = max(s.maxOpen, open)
	}
}

// noStatistics reports whether none of the pipeline's tables has a row
// count from VACUUM/ANALYZE or column statistics.
func (p *pipeline) noStatistics(ctx context.Context) (bool, error) {
	var n int64
	err := p.pool.QueryRow(ctx, `
WITH t AS (
    -- the tables and, of a partitioned one, its partitions
    SELECT c.oid, c.relname, c.reltuples FROM pg_class c
    JOIN pg_class r ON r.oid = coalesce(pg_partition_root(c.oid), c.oid)
    WHERE r.relname = ANY($1) AND c.relkind IN ('r', 'p') AND c.relnamespace = current_schema()::regnamespace)
SELECT (SELECT count(*) FROM t WHERE reltuples >= 0)
     + (SELECT count(*) FROM pg_stats WHERE schemaname = current_schema() AND tablename IN (SELECT relname FROM t))`, pipeTables).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read statistics: %w", err)
	}
	return n == 0, nil
}

// scrape reads the counters of `hookyard dev`'s /metrics (ops address):
// each metric name (histograms' _sum and _count too) summed over its labels.
func (p *pipeline) scrape(ctx context.Context) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.opsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape dev metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape dev metrics: HTTP %d", resp.StatusCode)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		if i := strings.IndexByte(name, '{'); i >= 0 {
			name = line[:i]
			rest = line[strings.LastIndexByte(line, '}')+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || math.IsNaN(v) {
			continue
		}
		out[name] += v
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read dev metrics: %w", err)
	}
	return out, nil
}

// tap notes, per event id, when its record was produced (the relay's
// producer stamps it) and when a consumer fetched it.
type tap struct {
	mu   sync.Mutex
	seen map[string]tapRec
}

type tapRec struct{ produced, fetched time.Time }

func (t *tap) run(ctx context.Context, cl *kgo.Client) {
	var m struct {
		EventID string `json:"event_id"`
	}
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		t.mu.Lock()
		fs.EachRecord(func(rec *kgo.Record) {
			m.EventID = ""
			if json.Unmarshal(rec.Value, &m) == nil && m.EventID != "" {
				if _, dup := t.seen[m.EventID]; !dup {
					t.seen[m.EventID] = tapRec{produced: rec.Timestamp, fetched: now}
				}
			}
		})
		t.mu.Unlock()
	}
}

func (t *tap) get(id string) (tapRec, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r, ok := t.seen[id]
	return r, ok
}

// cpuSample is CPU seconds used so far: by a process, by the bench itself,
// and by the whole machine (busy, all CPUs).
type cpuSample struct {
	wall             time.Time
	proc, self, busy float64
}

func readCPU(pid int) cpuSample {
	s := cpuSample{wall: time.Now()}
	s.proc = procCPU(strconv.Itoa(pid))
	s.self = procCPU("self")
	if v, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(v), "\n")
		f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal
		if len(f) >= 9 {
			var busy float64
			for i, x := range f[1:9] {
				if i == 3 || i == 4 { // idle, iowait
					continue
				}
				n, _ := strconv.ParseFloat(x, 64)
				busy += n
			}
			s.busy = busy / clockTicks
		}
	}
	return s
}

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// procCPU reads utime+stime of /proc/<pid>/stat in seconds.
func procCPU(pid string) float64 {
	v, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The command name may hold spaces; fields count from after its ')'.
	s := string(v)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (u + st) / clockTicks
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
