package reconciler

import (
	"context"
	"encoding/json"
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

// redeliverLost walks the hook's deliveries back to the checkpoint's high
// water minus the overlap and asks the provider to redeliver each event none of
// whose deliveries got a 2xx and that the inbox does not hold.
func (r *Reconciler) redeliverLost(ctx context.Context, s provider.Source, rep *SourceReport) error {
	lr := rep.listing(ListingDeliveries)
	cp, err := LoadCheckpoint(ctx, r.pool, s.Name(), ListingDeliveries)
	if err != nil {
		return err
	}
	var w eventWalk
	if cp.Cursor != "" {
		if err := json.Unmarshal([]byte(cp.Cursor), &w); err != nil {
			w = eventWalk{}
		}
		lr.ResumedAt = w.Cursor
	}
	if w.Since.IsZero() {
		w.Since = r.walkStart(cp.HighWater)
	}
	// Deliveries come newest first, so a redelivery that succeeded is seen
	// before the failed attempt it repaired.
	arrived := map[string]bool{}
	for {
		ds, next, err := s.Hooks.ListDeliveries(ctx, w.Cursor, r.cfg.PageSize)
		if err != nil {
			err = fmt.Errorf("list %s hook deliveries for %s/%s: %w", s.Provider, s.SourceAccount, s.Environment, err)
			return r.interrupted(ctx, s, lr, mustJSON(w), err)
		}
		lr.Pages++
		done := next == "" || len(ds) == 0
		for _, d := range ds {
			if d.DeliveredAt.Before(w.Since) {
				done = true // older than the walk reaches: the rest were walked before
				break
			}
			if d.DeliveredAt.After(w.Newest) {
				w.Newest = d.DeliveredAt
			}
			if d.OK() {
				arrived[d.GUID] = true
				continue
			}
			if arrived[d.GUID] {
				continue
			}
			asked, err := r.redeliver(ctx, s, d)
			if err != nil {
				return r.interrupted(ctx, s, lr, mustJSON(w), err)
			}
			if asked {
				rep.Redeliveries++
				r.redeliveries.WithLabelValues(s.Provider).Inc()
			}
			arrived[d.GUID] = true // asked (or known) once per walk
		}
		if done {
			lr.Complete = true
			var hw *time.Time
			if !w.Newest.IsZero() {
				hw = &w.Newest
			}
			return saveComplete(ctx, r.pool, s.Name(), ListingDeliveries, hw)
		}
		w.Cursor = next
		if err := saveProgress(ctx, r.pool, s.Name(), ListingDeliveries, mustJSON(w), nil); err != nil {
			return err
		}
	}
}

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
