// Package retention runs hookyard's retention pass: it keeps the
// time-partitioned tables (webhook_inbox_body, projection_history,
// ops_audit) covered ahead of now, drops whole partitions behind their
// horizons, forgets event identities past
// retention.identity_age, deletes subscribers' deliveries settled before
// retention.delivery_age, and empties the legacy body columns of rows
// received before bodies moved to partitions. The reconciler runs it every
// round, `hookyard retention` once; every service creates partitions ahead
// at start (Ensure).
//
// It owns no table: each owner package says what its table keeps and how
// (pkg/inbox for the ledger and the bodies, pkg/action for the
// deliveries). It must never forget an identity younger than identity_age
// nor drop a body an unfinished event still needs (the inbox moves those
// before a drop), nor delete a delivery that is not settled or that a
// later unsettled delivery of its resource still needs.
package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/partition"
	"github.com/hookyard/hookyard/pkg/projection"
)

// Policy is what is kept how long (pkg/config's retention keys).
type Policy struct {
	// PayloadAge is the body horizon: a body partition whose range ended
	// this long ago is dropped. Zero keeps bodies.
	PayloadAge time.Duration
	// PartitionInterval is the width of a body partition. Defaults to
	// partition.IntervalDefault.
	PartitionInterval time.Duration
	// DeadPayloadAge: dead and retrying events keep their body this long
	// after they were received.
	DeadPayloadAge time.Duration
	// IdentityAge: identities of finished events received this long ago are
	// forgotten. Zero keeps them.
	IdentityAge time.Duration
	// HistoryAge: projection_history partitions (PartitionInterval wide)
	// whose range ended this long ago are dropped. Zero keeps them.
	HistoryAge time.Duration
	// AuditAge: ops_audit partitions (AuditIntervals × PartitionInterval
	// wide) whose range ended this long ago are dropped. Zero keeps them.
	AuditAge time.Duration
	// DeliveryAge: subscribers' deliveries sent or skipped this long ago
	// are deleted, bodies with them (action.ForgetDeliveries). Zero keeps
	// them.
	DeliveryAge time.Duration
}

// AuditIntervals is how many partition intervals one ops_audit partition
// spans: audit records are few and kept long (400 days by default), so a
// partition a month keeps their number small.
const AuditIntervals = 30

// ForgetBatch is how many ledger rows (or deliveries) one statement
// forgets.
const ForgetBatch = 1000

// Report is what one pass did.
type Report struct {
	Partitions   []partition.Change `json:"partitions"`
	Forgotten    int64              `json:"identities_forgotten"`
	LegacyPurged int64              `json:"legacy_payloads_purged"`
	// DeliveriesForgotten is how many subscriber deliveries were deleted.
	DeliveriesForgotten int64 `json:"deliveries_forgotten"`
}

// Maintainer returns the partition maintainer of p's tables; now is the
// clock its drop hooks read.
func Maintainer(pool *pgxpool.Pool, log *slog.Logger, p Policy, now func() time.Time) *partition.Maintainer {
	return &partition.Maintainer{Pool: pool, Log: log, Tables: []partition.Table{
		inbox.BodyTable(p.PartitionInterval, p.PayloadAge, p.DeadPayloadAge, now),
		projection.HistoryTable(p.PartitionInterval, p.HistoryAge),
		audit.Table(AuditIntervals*cmp.Or(p.PartitionInterval, partition.IntervalDefault), p.AuditAge),
	}}
}

// Ensure creates the partitions missing from now on; it drops nothing.
func Ensure(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, p Policy, now time.Time) ([]partition.Change, error) {
	return Maintainer(pool, log, p, func() time.Time { return now }).Ensure(ctx, now)
}

// Run is one retention pass at now. Its steps are independent: one that
// fails does not stop the others, and its error is returned with theirs.
func Run(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, p Policy, now time.Time) (Report, error) {
	var rep Report
	var errs []error
	var err error
	rep.Partitions, err = Maintainer(pool, log, p, func() time.Time { return now }).Run(ctx, now)
	errs = append(errs, err)
	if rep.Partitions == nil {
		rep.Partitions = []partition.Change{}
	}
	if p.IdentityAge > 0 {
		rep.Forgotten, err = inbox.ForgetIdentities(ctx, pool, now.Add(-p.IdentityAge), now.Add(-max(p.IdentityAge, p.DeadPayloadAge)), ForgetBatch)
		errs = append(errs, err)
	}
	if p.DeliveryAge > 0 {
		rep.DeliveriesForgotten, err = action.ForgetDeliveries(ctx, pool, now.Add(-p.DeliveryAge), ForgetBatch)
		errs = append(errs, err)
	}
	if p.PayloadAge > 0 {
		// Rows received before bodies moved to partitions (migration
		// 00021): their bodies are still purged column by column.
		rep.LegacyPurged, err = inbox.PurgePayloads(ctx, pool, now.Add(-p.PayloadAge), 1000)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return rep, fmt.Errorf("retention: %w", err)
	}
	return rep, nil
}
