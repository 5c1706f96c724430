package api

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/ops/audit"
)

// record writes the audit record of what the request did, as the
// request's principal. A payload is sent only after its record is written;
// a change is recorded after it happened, so when the record fails the
// request answers 503 audit_failed, saying the change stands, and the log
// keeps what was done.
func (a *api) record(c echo.Context, action string, target any, rows int64) error {
	who := PrincipalOf(c).Name
	err := audit.Record(c.Request().Context(), a.pool, who, action, target, rows)
	if err != nil {
		a.log.Error("audit record failed", slog.String("actor", who), slog.String("action", action),
			slog.Any("target", target), slog.Int64("rows", rows), slog.String("error", err.Error()))
	}
	return err
}

// auditFailed answers a change that happened but could not be recorded.
func auditFailed(c echo.Context) error {
	return fail(c, http.StatusServiceUnavailable, "audit_failed", "the operation was done but its audit record could not be written; the log has it")
}

// payloadNotRecorded answers a payload read whose record failed: the
// payload is not sent.
func payloadNotRecorded(c echo.Context) error {
	return fail(c, http.StatusServiceUnavailable, "audit_failed", "the payload is not sent: its read could not be recorded")
}

// wantsPayload says whether the request asks for payloads (?payload=true);
// denied when its token lacks the payload scope (answered 403 already).
func wantsPayload(c echo.Context) (want, denied bool, err error) {
	if c.QueryParam("payload") != "true" {
		return false, false, nil
	}
	if p := PrincipalOf(c); !p.Has(ScopePayload) {
		return false, true, missingScope(c, p, ScopePayload)
	}
	return true, false, nil
}

// recordPayloadRead records the read of row's payload; answered 503 when
// it fails, and then the payload is not sent.
func (a *api) recordPayloadRead(c echo.Context, row inbox.Row) error {
	return a.record(c, audit.ActionPayloadRead, eventTarget(inbox.Key{Provider: row.Provider,
		SourceAccount: row.SourceAccount, Environment: row.Environment, EventID: row.EventID}), PayloadRows(row))
}

// PayloadRows is the rows of personal data a read of row's payload
// returned: 0 once the payload is purged.
func PayloadRows(row inbox.Row) int64 {
	if row.Payload == nil {
		return 0
	}
	return 1
}

// DryRun is the answer of a purge's dry run (POST /v1/purge?dry_run=true,
// `hookyard purge -dry-run`): what it would touch.
type DryRun struct {
	DryRun bool      `json:"dry_run"`
	Cutoff time.Time `json:"cutoff"`
	inbox.PurgePreview
}

func eventTarget(k inbox.Key) map[string]any {
	return map[string]any{"provider": k.Provider, "account": k.SourceAccount, "environment": k.Environment, "event_id": k.EventID}
}

// filterTarget is a filter as the audit keeps it: the fields given (not
// empty, not zero).
func filterTarget(f map[string]any) map[string]any {
	for k, v := range f {
		if v == "" || v == 0 {
			delete(f, k)
		}
	}
	return f
}

// listAudit serves GET /v1/audit?since=&limit=: the records, newest first.
func (a *api) listAudit(c echo.Context) error {
	t, err := since(c)
	if err != nil {
		return badSince(c)
	}
	limit, ok := queryLimit(c)
	if !ok {
		return badLimit(c)
	}
	entries, err := audit.List(c.Request().Context(), a.pool, t, limit)
	if err != nil {
		return a.internal(c, err)
	}
	return c.JSON(http.StatusOK, map[string]any{"audit": entries, "count": len(entries)})
}
