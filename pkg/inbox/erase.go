package inbox

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErasedError is what an erased event's last_error says instead of the
// error it held (a provider's error may quote the body).
const ErasedError = "erased"

// eraseSQL removes the bodies of the events of one source account (or of
// some of its resources) whatever their status: their rows in
// webhook_inbox_body and the legacy columns, and a last error (a
// provider's error may quote the body). The provider's event time moves
// to occurred_at first where only a legacy payload held it. The ledger
// keeps identity, status, outcome and attempts, so a late repeat of an
// erased event is still recognised and never processed again; an
// unfinished event erased has nothing left to apply: the processor kills
// it as malformed, and replays refuse it as purged. Empty provider or
// environment match every one; an erase that names all three reads the
// primary key's range.
var eraseSQL = `
WITH sel AS (
    SELECT ctid, provider, source_account, environment, event_id, body_at FROM webhook_inbox w
    WHERE ($1 = '' OR w.provider = $1) AND w.source_account = $2 AND ($3 = '' OR w.environment = $3)
      AND (cardinality($4::text[]) = 0 OR w.resource_id = ANY($4::text[]))
      AND (w.body_at IS NOT NULL OR w.payload IS NOT NULL OR w.raw_body IS NOT NULL
           OR (w.last_error IS NOT NULL AND w.last_error <> '` + ErasedError + `'))
    FOR UPDATE
), gone AS (
    DELETE FROM webhook_inbox_body b USING sel
    WHERE b.provider = sel.provider AND b.source_account = sel.source_account
      AND b.environment = sel.environment AND b.event_id = sel.event_id AND b.stored_at = sel.body_at
), upd AS (
    -- by the ctids sel locked (a TID scan)
    UPDATE webhook_inbox w SET body_at = NULL, payload = NULL, raw_body = NULL,
        occurred_at = coalesce(w.occurred_at, ` + unixTimeSQL("w.payload->'created'") + `, ` + unixTimeSQL("w.payload->'occurred_at'") + `),
        last_error = CASE WHEN w.last_error IS NULL THEN NULL ELSE '` + ErasedError + `' END
    WHERE w.ctid = ANY (ARRAY(SELECT ctid FROM sel))
    RETURNING 1
)
SELECT count(*) FROM upd`

// EraseAccount removes the bodies of the events of source account account
// (of provider and environment; "" matches any) from the inbox, in tx, and
// says how many events it erased: for an erasure request, whatever the
// retention. resourceIDs narrows it to the events about those resources
// (one customer's); none erases the whole account. Erasing again erases
// nothing more (0).
func EraseAccount(ctx context.Context, tx pgx.Tx, provider, account, env string, resourceIDs []string) (int64, error) {
	if account == "" {
		return 0, fmt.Errorf("erase inbox: an account is required")
	}
	if resourceIDs == nil {
		resourceIDs = []string{}
	}
	var n int64
	if err := tx.QueryRow(ctx, eraseSQL, provider, account, env, resourceIDs).Scan(&n); err != nil {
		return 0, fmt.Errorf("erase inbox of %s: %w", account, err)
	}
	return n, nil
}

// eraseOutboxSQL deletes the messages of the account (or its resources)
// not yet published, and those the broker refused (outbox_dead): the work
// they name was erased with the events. Messages carry identities only,
// never a body; the account's are deleted with the rest of its data.
//
// Both tables are matched by the message key
// (provider/account/environment/type/id), never by casting the message: a
// refused message's text need not be JSON, and one cast failing would
// fail every erase.
const eraseOutboxSQL = `
WITH o AS (
    DELETE FROM outbox WHERE ` + outboxKeyMatch + `
    RETURNING 1
), d AS (
    DELETE FROM outbox_dead WHERE ` + outboxKeyMatch + `
    RETURNING 1
)
SELECT (SELECT count(*) FROM o), (SELECT count(*) FROM d)`

const outboxKeyMatch = `split_part(message_key, '/', 2) = $2 AND ($1 = '' OR split_part(message_key, '/', 1) = $1)
      AND ($3 = '' OR split_part(message_key, '/', 3) = $3)
      AND (cardinality($4::text[]) = 0 OR EXISTS (SELECT 1 FROM unnest($4::text[]) r WHERE right(message_key, length(r) + 1) = '/' || r))`

// EraseOutbox deletes, in tx, the unpublished and the refused outbox
// messages of the account (or its resources), as EraseAccount selects
// them, and says how many of each.
func EraseOutbox(ctx context.Context, tx pgx.Tx, provider, account, env string, resourceIDs []string) (outbox, dead int64, err error) {
	if account == "" {
		return 0, 0, fmt.Errorf("erase outbox: an account is required")
	}
	if resourceIDs == nil {
		resourceIDs = []string{}
	}
	if err := tx.QueryRow(ctx, eraseOutboxSQL, provider, account, env, resourceIDs).Scan(&outbox, &dead); err != nil {
		return 0, 0, fmt.Errorf("erase outbox of %s: %w", account, err)
	}
	return outbox, dead, nil
}
