package effects

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// claimed is an action this sender holds the lease of.
type claimed struct {
	key Key
	// status is sending, or dead when an interrupted attempt was the last
	// one the budget allowed.
	status string
	// attempts is this attempt's number and the claim's token.
	attempts int
	eventID  string
	// interrupted: the previous sender's lease expired mid-attempt.
	interrupted bool
	fact        *Fact
	// traceParent is the recording event's W3C traceparent ("" untraced).
	traceParent string
}

// claimSQL picks one kind's due actions through action_due (the status list
// is the index's predicate word for word, kind and order are its key, so the
// only sensible plan is a walk of that index stopping at $2 rows), skipping rows
// another sender is claiming, and takes a lease on them in the same
// statement. It commits on its own: nothing is held across the requests.
//
// A row still 'sending' whose lease passed was being sent by a sender that
// died or froze; its attempt may have reached the server, so it is sent
// again with the same key (or is dead if that was its last attempt).
const claimSQL = `
WITH due AS (
    SELECT provider, source_account, environment, subject_id, kind, status
    FROM action
    WHERE status IN ('pending', 'sending', 'failed', 'ambiguous') AND next_attempt_at <= now()
      AND kind = $1
    ORDER BY next_attempt_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE action a SET
        status = CASE WHEN d.status = 'sending' AND a.attempts - a.attempts_at_replay >= $4 THEN 'dead' ELSE 'sending' END,
        attempts = CASE WHEN d.status = 'sending' AND a.attempts - a.attempts_at_replay >= $4 THEN a.attempts ELSE a.attempts + 1 END,
        next_attempt_at = now() + $3::bigint * interval '1 millisecond',
        done_at = CASE WHEN d.status = 'sending' AND a.attempts - a.attempts_at_replay >= $4 THEN now() END,
        claimed_by = $5,
        last_error = CASE WHEN d.status = 'sending'
            THEN format('attempt %s interrupted: its sender (%s) stopped before recording the outcome', a.attempts, a.claimed_by)
            ELSE a.last_error END
    FROM due d
    WHERE a.provider = d.provider AND a.source_account = d.source_account AND a.environment = d.environment
      AND a.subject_id = d.subject_id AND a.kind = d.kind
    RETURNING a.provider, a.source_account, a.environment, a.subject_id, a.kind, a.status, a.attempts, a.event_id,
              d.status = 'sending' AS interrupted, coalesce(a.trace_parent, '') AS trace_parent
)
SELECT c.provider, c.source_account, c.environment, c.subject_id, c.kind, c.status, c.attempts, c.event_id, c.interrupted, c.trace_parent,
       f.fact_type, f.resource_type, f.resource_id, f.event_id, f.recorded_at, f.data
FROM claimed c
-- a receipt is about the invoice_paid fact of its invoice (factTypes)
LEFT JOIN fact f ON c.kind = 'receipt' AND f.provider = c.provider AND f.source_account = c.source_account
    AND f.environment = c.environment AND f.fact_type = 'invoice_paid' AND f.fact_id = c.subject_id`

func (s *Sender) claim(ctx context.Context, kind string, limit int) ([]claimed, error) {
	lease := (s.cfg.Timeout + s.cfg.LeaseMargin).Milliseconds()
	rows, err := s.pool.Query(ctx, claimSQL, kind, limit, lease, s.cfg.MaxAttempts, s.cfg.SenderID)
	if err != nil {
		return nil, fmt.Errorf("claim due actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var c claimed
		var factType, resType, resID, factEvent *string
		var recorded *time.Time
		var data []byte
		err := row.Scan(&c.key.Provider, &c.key.SourceAccount, &c.key.Environment, &c.key.SubjectID, &c.key.Kind,
			&c.status, &c.attempts, &c.eventID, &c.interrupted, &c.traceParent, &factType, &resType, &resID, &factEvent, &recorded, &data)
		if err == nil && factType != nil {
			c.fact = &Fact{Provider: c.key.Provider, SourceAccount: c.key.SourceAccount, Environment: c.key.Environment,
				Type: *factType, ID: c.key.SubjectID, ResourceType: *resType, ResourceID: *resID, EventID: *factEvent,
				RecordedAt: *recorded, Data: data}
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim due actions: %w", err)
	}
	return out, nil
}

// settleSQL records an attempt's outcome, only while this sender still holds
// the action: status sending under this attempt's number. A retryable
// outcome past the attempt budget is dead. It returns the status written; no
// row means the lease was lost and another sender owns the action.
const settleSQL = `
UPDATE action SET
    status = CASE WHEN $6 IN ('failed', 'ambiguous') AND attempts - attempts_at_replay >= $10 THEN 'dead' ELSE $6 END,
    last_error = CASE WHEN $6 = 'sent' THEN last_error ELSE $7 END,
    next_attempt_at = CASE WHEN $6 IN ('failed', 'ambiguous') THEN now() + $8::bigint * interval '1 millisecond' ELSE next_attempt_at END,
    done_at = CASE WHEN $6 IN ('sent', 'dead') OR attempts - attempts_at_replay >= $10 THEN now() END
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND subject_id = $4 AND kind = $5
  AND status = 'sending' AND attempts = $9
RETURNING status`

func (s *Sender) settle(ctx context.Context, c claimed, o outcome) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, SettleTimeout)
	defer cancel()
	var delay int64
	if o.status == StatusFailed || o.status == StatusAmbiguous {
		delay = s.backoff(c.attempts, o.retryAfter).Milliseconds()
	}
	var status string
	err := s.pool.QueryRow(ctx, settleSQL, c.key.Provider, c.key.SourceAccount, c.key.Environment, c.key.SubjectID, c.key.Kind,
		o.status, o.err, delay, c.attempts, s.cfg.MaxAttempts).Scan(&status)
	if err == pgx.ErrNoRows {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("record outcome of %s: %w", c.key, err)
	}
	return status, nil
}
