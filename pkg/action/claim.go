package action

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/fact"
)

// Claimed is an action a sender holds the lease of.
type Claimed struct {
	Key Key
	// Status is sending, or dead when an interrupted attempt was the last
	// one the budget allowed.
	Status string
	// Attempts is this attempt's number and the claim's token.
	Attempts int
	// SinceReplay is this attempt's number since the action's last replay
	// (Attempts when it was never replayed): what its backoff counts, so
	// that a replayed action is retried promptly.
	SinceReplay int
	EventID     string
	// Interrupted: the previous sender's lease expired mid-attempt.
	Interrupted bool
	// Fact is the fact the action is about; nil when none is recorded (or
	// the action is about no fact).
	Fact *fact.Fact
	// Body is the body stored with the action (a transition's); nil when
	// it is derived from Fact.
	Body []byte
	// TraceParent is the recording event's W3C traceparent ("" untraced).
	TraceParent string
}

// Lease says how a sender claims: the lease it takes, the attempt budget
// and its name.
type Lease struct {
	// For is how long the claim holds an action before another sender may
	// take it over.
	For time.Duration
	// MaxAttempts is how many attempts an action gets (after each replay).
	MaxAttempts int
	// SenderID names the sender in claimed_by.
	SenderID string
}

// claimSQL picks one kind's due actions through action_due (the status list
// is the index's predicate word for word, kind and order are its key, so the
// only sensible plan is a walk of that index stopping at $2 rows), skipping rows
// another sender is claiming, and takes a lease on them in the same
// statement. It commits on its own: nothing is held across the requests.
//
// The fact each action is about is joined in the same statement rather than
// read through the fact package afterwards: one statement per claim, one
// round trip per batch, and the plan that
// TestClaimPlanWalksTheDueIndexWithoutStatistics holds (a primary-key read
// of fact per claimed row) stays the claim's.
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
)` + claimTail

// claimOrderedSQL is claimSQL for an ordered kind (a subscriber's changes):
// an action is due only when no earlier action of its stream (same kind,
// account and order_key, lower order_seq) is unsettled — pending, sending,
// failed, ambiguous or dead. The probe is one descent of action_order_open
// per candidate, every stream column in its index condition. The walk of
// action_due passes the candidates blocked behind their stream's head, so
// a claim costs more the deeper the backlog per resource
// (BenchmarkOrderedClaim). A dead action blocks its stream until it is replayed: a
// subscriber never receives a resource's later change in place of an
// earlier one it missed.
//
// The probe reads the statement's snapshot: an earlier action settled
// after it began still blocks, until the next claim; never the other way
// round, since an unsettled action only becomes settled. Two senders
// claiming at once both see the earlier action unsettled, so neither takes
// the later one.
const claimOrderedSQL = `
WITH due AS (
    SELECT a.provider, a.source_account, a.environment, a.subject_id, a.kind, a.status
    FROM action a
    WHERE a.status IN ('pending', 'sending', 'failed', 'ambiguous') AND a.next_attempt_at <= now()
      AND a.kind = $1
      AND NOT EXISTS (
          SELECT 1 FROM action e
          WHERE e.kind = a.kind AND e.provider = a.provider AND e.source_account = a.source_account
            AND e.environment = a.environment AND e.order_key = a.order_key AND e.order_seq < a.order_seq
            AND e.order_key IS NOT NULL AND e.status IN ('pending', 'sending', 'failed', 'ambiguous', 'dead')
          -- OFFSET 0 keeps the probe a correlated subplan: pulled up into
          -- an anti join, it was planned (no statistics: one row expected)
          -- as a scan of the kind's every open ordered row per candidate,
          -- with the stream's columns as a join filter.
          OFFSET 0)
    ORDER BY a.next_attempt_at
    LIMIT $2
    FOR UPDATE OF a SKIP LOCKED
)` + claimTail

// claimTail takes the lease of the due rows and joins their facts; see
// claimSQL.
const claimTail = `, claimed AS (
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
    RETURNING a.provider, a.source_account, a.environment, a.subject_id, a.kind, a.status, a.attempts,
              a.attempts - a.attempts_at_replay AS since_replay, a.event_id,
              d.status = 'sending' AS interrupted, coalesce(a.trace_parent, '') AS trace_parent, a.body
)
SELECT c.provider, c.source_account, c.environment, c.subject_id, c.kind, c.status, c.attempts, c.since_replay, c.event_id,
       c.interrupted, c.trace_parent, c.body,
       f.fact_type, f.resource_type, f.resource_id, f.event_id, f.recorded_at, f.data
FROM claimed c
-- a fact's effect is about the fact of its declared type ($6) whose id is
-- its subject; a transition's ($6 = '') joins no fact
LEFT JOIN fact f ON $6 <> '' AND f.provider = c.provider AND f.source_account = c.source_account
    AND f.environment = c.environment AND f.fact_type = $6 AND f.fact_id = c.subject_id`

// Claim takes the lease of up to limit due actions of kind and returns
// them with their facts of type factType (the kind's declared on_fact; ""
// for a transition's effect, which carries its body).
func Claim(ctx context.Context, pool *pgxpool.Pool, kind, factType string, limit int, l Lease) ([]Claimed, error) {
	return claim(ctx, pool, claimSQL, kind, factType, limit, l)
}

// ClaimOrdered is Claim for an ordered kind (a subscriber's changes, see
// OrderedRecord): it takes no action while an earlier one of the same
// stream is unsettled (claimOrderedSQL). Its actions carry their bodies.
func ClaimOrdered(ctx context.Context, pool *pgxpool.Pool, kind string, limit int, l Lease) ([]Claimed, error) {
	return claim(ctx, pool, claimOrderedSQL, kind, "", limit, l)
}

func claim(ctx context.Context, pool *pgxpool.Pool, sql, kind, factType string, limit int, l Lease) ([]Claimed, error) {
	rows, err := pool.Query(ctx, sql, kind, limit, l.For.Milliseconds(), l.MaxAttempts, l.SenderID, factType)
	if err != nil {
		return nil, fmt.Errorf("claim due actions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Claimed, error) {
		var c Claimed
		var factType, resType, resID, factEvent *string
		var recorded *time.Time
		var data []byte
		var body *string
		err := row.Scan(&c.Key.Provider, &c.Key.SourceAccount, &c.Key.Environment, &c.Key.SubjectID, &c.Key.Kind,
			&c.Status, &c.Attempts, &c.SinceReplay, &c.EventID, &c.Interrupted, &c.TraceParent, &body, &factType, &resType, &resID, &factEvent, &recorded, &data)
		if body != nil {
			c.Body = []byte(*body)
		}
		if err == nil && factType != nil {
			c.Fact = &fact.Fact{Provider: c.Key.Provider, SourceAccount: c.Key.SourceAccount, Environment: c.Key.Environment,
				Type: *factType, ID: c.Key.SubjectID, ResourceType: *resType, ResourceID: *resID, EventID: *factEvent,
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

// Outcome is what one attempt of a claimed action came to.
type Outcome struct {
	// Status is sent, failed, ambiguous or dead.
	Status string
	// Error is the reason of anything but sent, for last_error.
	Error string
	// RetryIn is the delay before the next attempt of a failed or
	// ambiguous action.
	RetryIn time.Duration
}

// Settle records o for c, only while the lease of c is still held, and
// returns the status written: dead when a retryable outcome used up the
// attempt budget, "" when the lease was lost (another sender owns the
// action and writes its outcome).
func Settle(ctx context.Context, pool *pgxpool.Pool, c Claimed, o Outcome, maxAttempts int) (string, error) {
	var status string
	err := pool.QueryRow(ctx, settleSQL, c.Key.Provider, c.Key.SourceAccount, c.Key.Environment, c.Key.SubjectID, c.Key.Kind,
		o.Status, o.Error, o.RetryIn.Milliseconds(), c.Attempts, maxAttempts).Scan(&status)
	if err == pgx.ErrNoRows {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("record outcome of %s: %w", c.Key, err)
	}
	return status, nil
}
