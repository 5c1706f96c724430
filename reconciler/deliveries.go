package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
)

// RedeliverAgainAfter is how long after asking for a redelivery of an
// event that still did not arrive the reconciler asks again.
const RedeliverAgainAfter = time.Hour

// RedeliveryLimit is how old a delivery GitHub still redelivers: "You can
// only redeliver webhook deliveries that occurred in the past 3 days"
// (https://docs.github.com/en/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks).
// A failed delivery not arrived by then is given up.
const RedeliveryLimit = 72 * time.Hour

// Reasons a redelivery is given up, as reconcile_redelivery.reason starts.
const (
	// GiveUpTooOld: the first failed delivery is older than RedeliveryLimit.
	GiveUpTooOld = "past GitHub's 3-day redelivery limit"
	// GiveUpRefused: GitHub refused the redelivery (404, 422); its answer follows.
	GiveUpRefused = "GitHub refused the redelivery"
)

// followFailedSQL records a failed delivery whose event the inbox does not
// hold, to be followed by followRedeliveries until it arrives or is given
// up. The walk sees the newest failed attempt first; the row keeps the
// earliest failure (the 3-day limit counts from it) and the newest attempt
// (the one asked for).
const followFailedSQL = `
INSERT INTO reconcile_redelivery (source, guid, delivery_id, first_failed_at) VALUES ($1, $2, $3, $4)
ON CONFLICT (source, guid) DO UPDATE
SET first_failed_at = least(reconcile_redelivery.first_failed_at, EXCLUDED.first_failed_at),
    delivery_id = greatest(reconcile_redelivery.delivery_id, EXCLUDED.delivery_id)`

// pendingRedeliveriesSQL are the source's followed deliveries not given up.
const pendingRedeliveriesSQL = `
SELECT guid, delivery_id, first_failed_at, last_asked_at FROM reconcile_redelivery
WHERE source = $1 AND given_up_at IS NULL ORDER BY first_failed_at, guid`

// reserveRedeliverySQL claims the right to ask for an event's redelivery:
// due when never asked, and again only RedeliverAgainAfter after the last
// ask. Overlapping rounds (and two reconcilers) see the same row; only one
// asks.
const reserveRedeliverySQL = `
UPDATE reconcile_redelivery SET last_asked_at = $3, attempts = attempts + 1
WHERE source = $1 AND guid = $2 AND given_up_at IS NULL
  AND (last_asked_at IS NULL OR last_asked_at <= $3::timestamptz - make_interval(secs => $4::float8))
RETURNING 1`

// releaseRedeliverySQL gives back a reservation whose request failed for a
// reason that may pass (rate limit, outage): the next round asks again.
const releaseRedeliverySQL = `
UPDATE reconcile_redelivery SET last_asked_at = $3, attempts = attempts - 1
WHERE source = $1 AND guid = $2`

const giveUpRedeliverySQL = `
UPDATE reconcile_redelivery SET given_up_at = $3, reason = $4
WHERE source = $1 AND guid = $2 AND given_up_at IS NULL`

const arrivedRedeliverySQL = `DELETE FROM reconcile_redelivery WHERE source = $1 AND guid = $2`

// recordFailed follows one failed delivery's event, unless the inbox holds it.
func (r *Reconciler) recordFailed(ctx context.Context, s provider.Source, d provider.HookDelivery) error {
	received, err := r.received(ctx, s, d.GUID)
	if err != nil || received {
		return err
	}
	if _, err := r.pool.Exec(ctx, followFailedSQL, s.Name(), d.GUID, d.ID, d.DeliveredAt); err != nil {
		return fmt.Errorf("follow failed delivery %s: %w", d.GUID, err)
	}
	return nil
}

func (r *Reconciler) received(ctx context.Context, s provider.Source, guid string) (bool, error) {
	ok, err := inbox.Received(ctx, r.pool, inbox.Key{Provider: s.Provider, SourceAccount: s.SourceAccount, Environment: s.Environment, EventID: guid})
	if err != nil {
		return false, fmt.Errorf("look up delivery %s: %w", guid, err)
	}
	return ok, nil
}

type pendingRedelivery struct {
	guid        string
	deliveryID  int64
	firstFailed time.Time
	lastAsked   *time.Time
}

// followRedeliveries asks again for every followed delivery of the source
// that is due, whatever the walk's window: forgets those that arrived,
// gives up those GitHub no longer redelivers. A refusal (404, 422) is
// permanent for that delivery and recorded on it; any other failure
// (rate limit, outage) stops the step and the next round asks again.
func (r *Reconciler) followRedeliveries(ctx context.Context, s provider.Source, rep *SourceReport) error {
	rows, err := r.pool.Query(ctx, pendingRedeliveriesSQL, s.Name())
	if err != nil {
		return fmt.Errorf("list followed redeliveries of %s: %w", s.Name(), err)
	}
	pending, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pendingRedelivery, error) {
		var p pendingRedelivery
		err := row.Scan(&p.guid, &p.deliveryID, &p.firstFailed, &p.lastAsked)
		return p, err
	})
	if err != nil {
		return fmt.Errorf("list followed redeliveries of %s: %w", s.Name(), err)
	}
	for _, p := range pending {
		received, err := r.received(ctx, s, p.guid)
		if err != nil {
			return err
		}
		if received {
			if _, err := r.pool.Exec(ctx, arrivedRedeliverySQL, s.Name(), p.guid); err != nil {
				return fmt.Errorf("forget arrived delivery %s: %w", p.guid, err)
			}
			continue
		}
		now := r.now()
		if !p.firstFailed.After(now.Add(-RedeliveryLimit)) {
			if err := r.giveUp(ctx, s, p.guid, GiveUpTooOld, rep); err != nil {
				return err
			}
			continue
		}
		var one int
		err = r.pool.QueryRow(ctx, reserveRedeliverySQL, s.Name(), p.guid, now, RedeliverAgainAfter.Seconds()).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // asked recently, by this reconciler or another
		}
		if err != nil {
			return fmt.Errorf("reserve redelivery of %s: %w", p.guid, err)
		}
		err = s.Hooks.Redeliver(ctx, p.deliveryID)
		if errors.Is(err, provider.ErrRedeliveryRefused) {
			if gerr := r.giveUp(ctx, s, p.guid, GiveUpRefused+": "+err.Error(), rep); gerr != nil {
				return gerr
			}
			continue
		}
		if err != nil {
			if _, rerr := r.pool.Exec(context.WithoutCancel(ctx), releaseRedeliverySQL, s.Name(), p.guid, p.lastAsked); rerr != nil {
				err = fmt.Errorf("%w; %w", err, rerr)
			}
			return fmt.Errorf("redeliver %s (delivery %d): %w", p.guid, p.deliveryID, err)
		}
		rep.Redeliveries++
		r.redeliveries.WithLabelValues(s.Provider).Inc()
	}
	return nil
}

func (r *Reconciler) giveUp(ctx context.Context, s provider.Source, guid, reason string, rep *SourceReport) error {
	tag, err := r.pool.Exec(ctx, giveUpRedeliverySQL, s.Name(), guid, r.now(), reason)
	if err != nil {
		return fmt.Errorf("give up redelivery of %s: %w", guid, err)
	}
	if tag.RowsAffected() == 1 {
		rep.RedeliveriesGivenUp++
		r.givenUp.WithLabelValues(s.Provider).Inc()
		r.log.WarnContext(ctx, "redelivery given up: the event is lost unless the sender sends it again",
			"source", s.Name(), "guid", guid, "reason", reason)
	}
	return nil
}

// GivenUpRedelivery is a delivery whose event never arrived and that
// GitHub no longer redelivers.
type GivenUpRedelivery struct {
	Source        string    `json:"source"`
	GUID          string    `json:"guid"`
	DeliveryID    int64     `json:"delivery_id"`
	FirstFailedAt time.Time `json:"first_failed_at"`
	Attempts      int       `json:"redeliveries_asked"`
	GivenUpAt     time.Time `json:"given_up_at"`
	Reason        string    `json:"reason"`
}

// GivenUpRedeliveries lists the given-up redeliveries, newest first, at
// most limit, for `hookyard reconcile`.
func GivenUpRedeliveries(ctx context.Context, pool *pgxpool.Pool, limit int) ([]GivenUpRedelivery, error) {
	rows, err := pool.Query(ctx, `SELECT source, guid, delivery_id, first_failed_at, attempts, given_up_at, coalesce(reason, '')
FROM reconcile_redelivery WHERE given_up_at IS NOT NULL ORDER BY given_up_at DESC, guid LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list given-up redeliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (GivenUpRedelivery, error) {
		var g GivenUpRedelivery
		err := row.Scan(&g.Source, &g.GUID, &g.DeliveryID, &g.FirstFailedAt, &g.Attempts, &g.GivenUpAt, &g.Reason)
		return g, err
	})
	if err != nil {
		return nil, fmt.Errorf("list given-up redeliveries: %w", err)
	}
	return out, nil
}
