package job

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/ops/replay"
)

// Kinds of jobs.
const (
	KindPurge           = "purge"
	KindReplayResource  = "replay_resource"
	KindReplayPartition = "replay_partition"
)

// Bounds of one step.
const (
	PurgeChunk          = 1000
	PartitionStepRecord = 5000
)

// PurgeParams: drop the payloads of finished events received before
// Cutoff, and audit records older than AuditCutoff.
type PurgeParams struct {
	Cutoff time.Time `json:"cutoff"`
	// AuditCutoff is the audit's own retention (retention.audit_age).
	// Zero leaves the audit alone.
	AuditCutoff time.Time `json:"audit_cutoff,omitzero"`
}

// auditDone is the cursor once the audit's old records are gone.
var auditDone = json.RawMessage(`{"audit":"done"}`)

// PurgeStep purges one chunk per step; done when a chunk comes back short.
// The first step also deletes the audit records past their retention.
func PurgeStep(pool *pgxpool.Pool) Step {
	return func(ctx context.Context, params, cursor json.RawMessage) (json.RawMessage, map[string]int64, bool, error) {
		var p PurgeParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, nil, false, fmt.Errorf("purge job params: %w", err)
		}
		did := map[string]int64{}
		if cursor == nil && !p.AuditCutoff.IsZero() {
			n, err := audit.Purge(ctx, pool, p.AuditCutoff)
			did["audit_purged"] = n
			if err != nil {
				return nil, did, false, err
			}
		}
		n, err := inbox.PurgeChunk(ctx, pool, p.Cutoff, PurgeChunk)
		did["purged"] = n
		return auditDone, did, n < PurgeChunk, err
	}
}

// ResourceParams: re-enqueue every event of Resource received since Since.
type ResourceParams struct {
	Resource message.Resource `json:"resource"`
	Since    time.Time        `json:"since"`
}

// ReplayResourceStep replays a resource's events in one statement: a
// resource's events are few, and the statement skips events already
// pending, so running it again is harmless.
func ReplayResourceStep(pool *pgxpool.Pool) Step {
	return func(ctx context.Context, params, _ json.RawMessage) (json.RawMessage, map[string]int64, bool, error) {
		var p ResourceParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, nil, false, fmt.Errorf("replay resource job params: %w", err)
		}
		r := p.Resource
		n, err := inbox.ReplayResource(ctx, pool, r.Provider, r.SourceAccount, r.Environment, r.Type, r.ID, p.Since)
		return nil, map[string]int64{"replayed": n}, true, err
	}
}

// PartitionParams is a partition replay request; its end offset is fixed by
// the first step (the high watermark then), so later steps never read the
// replay's own records.
type PartitionParams struct {
	Partition  int32     `json:"partition"`
	FromOffset *int64    `json:"from_offset,omitempty"`
	Since      time.Time `json:"since,omitempty"`
	ToOffset   *int64    `json:"to_offset,omitempty"`
	Limit      int       `json:"limit,omitempty"`
}

// partitionCursor is where the next step resumes.
type partitionCursor struct {
	Next int64 `json:"next_offset"`
	End  int64 `json:"end_offset"`
	Read int   `json:"read"`
}

// ReplayPartitionStep reads at most PartitionStepRecord records per step
// and resumes at the report's next offset.
func ReplayPartitionStep(r *replay.Replayer) Step {
	return func(ctx context.Context, params, cursor json.RawMessage) (json.RawMessage, map[string]int64, bool, error) {
		var p PartitionParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, nil, false, fmt.Errorf("replay partition job params: %w", err)
		}
		req := replay.Request{Partition: p.Partition, FromOffset: p.FromOffset, Since: p.Since, ToOffset: p.ToOffset}
		var cur partitionCursor
		if len(cursor) > 0 && string(cursor) != "null" {
			if err := json.Unmarshal(cursor, &cur); err != nil {
				return nil, nil, false, fmt.Errorf("replay partition job cursor: %w", err)
			}
			req.FromOffset, req.Since, req.ToOffset = &cur.Next, time.Time{}, &cur.End
		}
		req.Limit = PartitionStepRecord
		if p.Limit > 0 {
			req.Limit = min(req.Limit, p.Limit-cur.Read)
		}
		if req.FromOffset != nil && req.ToOffset != nil && *req.FromOffset >= *req.ToOffset {
			return cursor, nil, true, nil
		}
		rep, err := r.Replay(ctx, req)
		if err != nil {
			return nil, nil, false, err
		}
		cur = partitionCursor{Next: rep.NextOffset, End: rep.EndOffset, Read: cur.Read + rep.Read}
		next, err := json.Marshal(cur)
		if err != nil {
			return nil, nil, false, err
		}
		did := map[string]int64{"read": int64(rep.Read), "replayed_events": int64(rep.ReplayedEvents), "replayed_other": int64(rep.ReplayedOther)}
		for k, v := range rep.Skipped {
			did["skipped_"+k] += int64(v)
		}
		done := rep.Complete || rep.Stopped != "" || rep.Read == 0 || (p.Limit > 0 && cur.Read >= p.Limit)
		return next, did, done, nil
	}
}

// KindReplayDead replays the dead events a filter selects, in chunks.
const KindReplayDead = "replay_dead"

// ReplayDeadChunk bounds one step of a dead replay.
const ReplayDeadChunk = 500

// DeadParams: replay at most Max of the dead events Filter selects, the
// number the operator was shown before starting (an event that dies again
// while the job runs is not replayed a second time past that count).
type DeadParams struct {
	Provider      string    `json:"provider,omitempty"`
	SourceAccount string    `json:"account,omitempty"`
	Environment   string    `json:"environment,omitempty"`
	EventType     string    `json:"type,omitempty"`
	Since         time.Time `json:"since,omitzero"`
	Max           int64     `json:"max"`
}

// Filter is the inbox filter of p.
func (p DeadParams) Filter() inbox.DeadFilter {
	return inbox.DeadFilter{Provider: p.Provider, SourceAccount: p.SourceAccount, Environment: p.Environment,
		EventType: p.EventType, Since: p.Since}
}

// ReplayDeadStep replays up to ReplayDeadChunk dead events per step; the
// cursor is how many were replayed so far. A replayed event is pending, no
// longer dead, so the next step's statement picks the next ones.
func ReplayDeadStep(pool *pgxpool.Pool) Step {
	return func(ctx context.Context, params, cursor json.RawMessage) (json.RawMessage, map[string]int64, bool, error) {
		var p DeadParams
		if err := json.Unmarshal(params, &p); err != nil {
			return nil, nil, false, fmt.Errorf("replay dead job params: %w", err)
		}
		var done int64
		if len(cursor) > 0 && string(cursor) != "null" {
			if err := json.Unmarshal(cursor, &done); err != nil {
				return nil, nil, false, fmt.Errorf("replay dead job cursor: %w", err)
			}
		}
		chunk := min(int64(ReplayDeadChunk), p.Max-done)
		if chunk <= 0 {
			return cursor, nil, true, nil
		}
		f := p.Filter()
		f.Limit = int(chunk)
		n, err := inbox.ReplayDeadMatching(ctx, pool, f)
		if err != nil {
			return nil, nil, false, err
		}
		done += n
		next, err := json.Marshal(done)
		if err != nil {
			return nil, nil, false, err
		}
		return next, map[string]int64{"replayed": n}, n < chunk || done >= p.Max, nil
	}
}
