package projection

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/message"
)

// reconcile_listed holds a listing's state for the check that names it
// (message.Message.ListedSeq): the record carries the identity, this table
// the state, so no provider object travels through Kafka. EnqueueListed
// writes the rows, the processor reads them (LoadListed) and deletes them
// in the transaction that handles the check (QueueDeleteListed), and an
// erasure deletes an account's (Erase).

// ListedKey names one listing's state of one resource: the check's
// identity.
type ListedKey struct {
	Resource message.Resource
	// Seq is the listing's fetch start (StartFetch), read before its page
	// was asked for.
	Seq int64
}

// ListedState is a resource's state as a listing returned it.
type ListedState struct {
	State   []byte
	Status  string
	Deleted bool
	// Start is when the listing was asked for: the write is ordered by it
	// like a fetch's.
	Start FetchStart
}

// loadListedSQL reads the states of keys by primary key, one probe each:
// the LATERAL subquery with LIMIT 1 cannot be flattened into a join, which
// could hash or scan the whole table on a table without statistics (as
// inbox's loadSQL).
const loadListedSQL = `
SELECT k.i, l.state::text, l.status, l.deleted, l.listed_at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int8[]) WITH ORDINALITY AS k(p, a, e, t, id, seq, i)
CROSS JOIN LATERAL (
    SELECT state, status, deleted, listed_at FROM reconcile_listed
    WHERE provider = k.p AND source_account = k.a AND environment = k.e AND resource_type = k.t AND resource_id = k.id AND seq = k.seq
    LIMIT 1
) l`

// LoadListed reads the listed states of keys. A key with none (its check
// was handled already: a redelivered record) is absent from the map.
func LoadListed(ctx context.Context, pool *pgxpool.Pool, keys []ListedKey) (map[ListedKey]ListedState, error) {
	out := make(map[ListedKey]ListedState, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	cols := make([][]string, 5)
	seqs := make([]int64, len(keys))
	for i, k := range keys {
		r := k.Resource
		for j, v := range []string{r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID} {
			cols[j] = append(cols[j], v)
		}
		seqs[i] = k.Seq
	}
	rows, err := pool.Query(ctx, loadListedSQL, cols[0], cols[1], cols[2], cols[3], cols[4], seqs)
	if err != nil {
		return nil, fmt.Errorf("load listed states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i int64
		var st ListedState
		var state string
		var at time.Time
		if err := rows.Scan(&i, &state, &st.Status, &st.Deleted, &at); err != nil {
			return nil, fmt.Errorf("load listed states: %w", err)
		}
		k := keys[i-1]
		st.State, st.Start = []byte(state), FetchStart{At: at, Seq: k.Seq}
		out[k] = st
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load listed states: %w", err)
	}
	return out, nil
}

// deleteListedSQL drops a resource's listed states up to the one a check
// named: that check is handled, and an older listing's check (still in the
// topic behind it, or lost to nothing) would be written as stale anyway.
const deleteListedSQL = `
DELETE FROM reconcile_listed
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND resource_type = $4 AND resource_id = $5 AND seq <= $6`

// QueueDeleteListed queues, into the transaction that handles the check
// of k, the deletion of k's state and of the resource's older ones.
func QueueDeleteListed(b *pgx.Batch, k ListedKey) {
	r := k.Resource
	b.Queue(deleteListedSQL, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, k.Seq).Exec(
		func(pgconn.CommandTag) error { return nil })
}
