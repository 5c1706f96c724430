package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
)

// RedeliverAgainAfter is how long after asking for a redelivery of an
// event that still did not arrive the reconciler asks again.
const RedeliverAgainAfter = time.Hour

// reserveRedeliverySQL claims the right to ask for an event's redelivery:
// once, and again only after RedeliverAgainAfter. Overlapping rounds (and
// two reconcilers) see the same failed delivery; only one asks.
const reserveRedeliverySQL = `
INSERT INTO reconcile_redelivery (source, guid, delivery_id) VALUES ($1, $2, $3)
ON CONFLICT (source, guid) DO UPDATE SET asked_at = now(), delivery_id = EXCLUDED.delivery_id
WHERE reconcile_redelivery.asked_at <= now() - make_interval(secs => $4::float8)
RETURNING 1`

// redeliver asks for one failed delivery's event again, unless the inbox
// holds it or it was asked for recently. A failed request gives the
// reservation back, so the next round asks again.
func (r *Reconciler) redeliver(ctx context.Context, s provider.Source, d provider.HookDelivery) (bool, error) {
	received, err := inbox.Received(ctx, r.pool, inbox.Key{Provider: s.Provider, SourceAccount: s.SourceAccount, Environment: s.Environment, EventID: d.GUID})
	if err != nil {
		return false, fmt.Errorf("look up delivery %s: %w", d.GUID, err)
	}
	if received {
		return false, nil
	}
	var one int
	err = r.pool.QueryRow(ctx, reserveRedeliverySQL, s.Name(), d.GUID, d.ID, RedeliverAgainAfter.Seconds()).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reserve redelivery of %s: %w", d.GUID, err)
	}
	if err := s.Hooks.Redeliver(ctx, d.ID); err != nil {
		if _, derr := r.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM reconcile_redelivery WHERE source = $1 AND guid = $2`, s.Name(), d.GUID); derr != nil {
			err = fmt.Errorf("%w; %w", err, derr)
		}
		return false, fmt.Errorf("redeliver %s (delivery %d): %w", d.GUID, d.ID, err)
	}
	return true, nil
}
