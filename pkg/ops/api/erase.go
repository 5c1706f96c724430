package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/audit"
	"github.com/hookyard/hookyard/pkg/projection"
)

// EraseRequest names whose personal data to remove: one source account's
// (of one provider and environment, or of every one), or only that of
// some of its resources (one customer's subscriptions).
type EraseRequest struct {
	Provider    string   `json:"provider,omitempty"`
	Account     string   `json:"account"`
	Environment string   `json:"environment,omitempty"`
	Resources   []string `json:"resources,omitempty"`
}

// Erased is what an erasure removed, in rows per table.
type Erased struct {
	Request EraseRequest `json:"erased"`
	// Rows changed or deleted, per table.
	Rows map[string]int64 `json:"rows"`
	// Total is the sum of Rows, the audit record's rows.
	Total int64 `json:"total"`
	// Changes is how many change records (one per projection erased, its
	// emptied state under its key) were queued for the changes topic, in
	// the erasure's transaction: once published they are each key's latest
	// record, and compaction drops the earlier ones, which held the
	// personal data. 0 without a changes topic.
	Changes int64 `json:"changes_published"`
}

// Erase removes, in one transaction, the personal data of r's account (or
// resources) from every table that holds some, and records the erasure in
// ops_audit as actor in the same transaction: the erasure and its record
// commit together or not at all. Identities (event, resource, fact and
// action keys), versions, statuses and fences stay, so repeats are still
// recognised and a projection still refuses stale snapshots:
//
//   - webhook_inbox: payload, raw body and last error (inbox.EraseAccount);
//   - outbox, outbox_dead: the account's messages not yet published
//     (inbox.EraseOutbox);
//   - fact: data emptied (fact.Erase);
//   - action: unsent ones dead, last errors gone, subscribers' deliveries
//     without their bodies (action.Erase);
//   - projection: state emptied; projection_history: detail;
//     reconcile_divergence, reconcile_listed: deleted (projection.Erase);
//   - the compacted changes topic (changesTopic): a change record of each
//     erased projection, with its emptied state, queued in the outbox
//     (projection.QueueErasedChanges) after the erasure's own deletions
//     there; the relay publishes it, and compaction then drops the
//     resource's earlier records. Consumers that read those records
//     before keep their copies: tell them.
//
// A provider that still has the customer sends its data again with its
// next event, and a reconcile check fetches it again: erase it at the
// provider first, or remove the endpoint.
func Erase(ctx context.Context, pool *pgxpool.Pool, actor string, r EraseRequest, changesTopic string) (Erased, error) {
	out := Erased{Request: r, Rows: map[string]int64{}}
	if strings.TrimSpace(r.Account) == "" {
		return out, fmt.Errorf("erase: an account is required")
	}
	ids := r.Resources
	if ids == nil {
		ids = []string{}
	}
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		clear(out.Rows)
		n, err := inbox.EraseAccount(ctx, tx, r.Provider, r.Account, r.Environment, ids)
		if err != nil {
			return err
		}
		out.Rows["webhook_inbox"] = n
		if out.Rows["outbox"], out.Rows["outbox_dead"], err = inbox.EraseOutbox(ctx, tx, r.Provider, r.Account, r.Environment, ids); err != nil {
			return err
		}
		if out.Rows["fact"], err = fact.Erase(ctx, tx, r.Provider, r.Account, r.Environment, ids); err != nil {
			return err
		}
		if out.Rows["action"], err = action.Erase(ctx, tx, r.Provider, r.Account, r.Environment, ids); err != nil {
			return err
		}
		p, err := projection.Erase(ctx, tx, r.Provider, r.Account, r.Environment, ids)
		if err != nil {
			return err
		}
		out.Rows["projection"], out.Rows["projection_history"] = p.Projections, p.History
		out.Rows["reconcile_divergence"], out.Rows["reconcile_listed"] = p.Divergences, p.Listed
		if out.Changes, err = projection.QueueErasedChanges(ctx, tx, r.Provider, r.Account, r.Environment, ids, changesTopic); err != nil {
			return err
		}
		out.Total = 0
		for _, n := range out.Rows {
			out.Total += n
		}
		return audit.Record(ctx, tx, actor, audit.ActionErase, r, out.Total)
	})
	if err != nil {
		return out, fmt.Errorf("erase %s: %w", r.Account, err)
	}
	return out, nil
}

// erase serves POST /v1/erase with an EraseRequest as its JSON body.
func (a *api) erase(c echo.Context) error {
	var req EraseRequest
	if err := decodeBody(c, &req); err != nil {
		return fail(c, http.StatusBadRequest, "bad_body", "body must be JSON: account, and optionally provider, environment, resources: "+err.Error())
	}
	if strings.TrimSpace(req.Account) == "" {
		return fail(c, http.StatusBadRequest, "bad_account", "account is required")
	}
	for _, id := range req.Resources {
		if id == "" {
			return fail(c, http.StatusBadRequest, "bad_resource", "resources must not hold an empty id")
		}
	}
	out, err := Erase(c.Request().Context(), a.pool, PrincipalOf(c).Name, req, a.cfg.ChangesTopic)
	if err != nil {
		return a.internal(c, err)
	}
	a.log.Info("personal data erased", slog.String("account", req.Account), slog.Int64("rows", out.Total),
		slog.Int64("changes_published", out.Changes))
	return c.JSON(http.StatusOK, out)
}
