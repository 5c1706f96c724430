package fact

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNotFound: no fact has that key.
var ErrNotFound = errors.New("no such fact")

// Key is a fact's identity: the row's primary key.
type Key struct {
	Provider      string
	SourceAccount string
	Environment   string
	Type          string
	ID            string
}

// Fact is one fact row. Its JSON is what an effect's body carries.
type Fact struct {
	Provider      string          `json:"provider"`
	SourceAccount string          `json:"source_account"`
	Environment   string          `json:"environment"`
	Type          string          `json:"type"`
	ID            string          `json:"id"`
	ResourceType  string          `json:"resource_type"`
	ResourceID    string          `json:"resource_id"`
	EventID       string          `json:"event_id"`
	RecordedAt    time.Time       `json:"recorded_at"`
	Data          json.RawMessage `json:"data"`
}

// recordSQL keeps the first recording of a fact: a repeated or replayed
// event records nothing new.
const recordSQL = `
INSERT INTO fact (provider, source_account, environment, fact_type, fact_id, resource_type, resource_id, event_id, data)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb)
ON CONFLICT DO NOTHING`

// QueueRecord queues the recording of f (RecordedAt is the database's) into
// b, for the caller's transaction.
func QueueRecord(b *pgx.Batch, f Fact) {
	b.Queue(recordSQL, f.Provider, f.SourceAccount, f.Environment, f.Type, f.ID, f.ResourceType, f.ResourceID, f.EventID, string(f.Data))
}

const getSQL = `
SELECT fact_type, resource_type, resource_id, event_id, recorded_at, data FROM fact
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND fact_type = $4 AND fact_id = $5`

// Get reads one fact. It returns ErrNotFound when there is none.
func Get(ctx context.Context, pool *pgxpool.Pool, k Key) (Fact, error) {
	f := Fact{Provider: k.Provider, SourceAccount: k.SourceAccount, Environment: k.Environment, ID: k.ID}
	err := pool.QueryRow(ctx, getSQL, k.Provider, k.SourceAccount, k.Environment, k.Type, k.ID).
		Scan(&f.Type, &f.ResourceType, &f.ResourceID, &f.EventID, &f.RecordedAt, &f.Data)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Fact{}, ErrNotFound
	case err != nil:
		return Fact{}, fmt.Errorf("read fact: %w", err)
	}
	return f, nil
}
