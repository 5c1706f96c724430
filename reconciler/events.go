package reconciler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
)

// maxIdentityLen is the receiver's bound on event and resource ids (a btree
// entry holds about 2.7 kB).
const maxIdentityLen = 512

// ingest stores the listed events the endpoint accepts, each with its
// outbox row, in the receiver's intake statement, and says how many were
// new. An event the endpoint does not accept is left out (its delivery
// would be stored as ignored; nothing is lost). One whose identity the
// adapter refuses (another account or mode) is skipped and reported.
func (r *Reconciler) ingest(ctx context.Context, s provider.Source, evs []provider.ListedEvent, rep *SourceReport) (int64, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	now := r.now()
	recs := make([]*inbox.Record, 0, len(evs))
	for _, le := range evs {
		ev, err := s.Identify.Identify(s.Endpoint, le.Body, now)
		ep := s.Accepting(ev.Type)
		if ep == nil {
			continue
		}
		if ep != s.Endpoint && err == nil {
			// Filed under the endpoint that accepts it, read as its
			// deliveries are.
			ev, err = s.Identify.Identify(ep, le.Body, now)
		}
		rec := &inbox.Record{Endpoint: ep, Event: ev}
		switch {
		case err == nil:
			if err := storable(&ev); err != nil {
				rep.Errors = append(rep.Errors, fmt.Sprintf("event %.64s: %v", le.ID, err))
				continue
			}
		case errors.Is(err, provider.ErrVersionFromFuture):
			// As the receiver does: kept dead under its identity, never applied.
			rec.Malformed, rec.DeadOutcome = err.Error(), inbox.OutcomeVersionFromFuture
		default:
			rep.Errors = append(rep.Errors, fmt.Sprintf("event %.64s: %v", le.ID, err))
			continue
		}
		if ep.StoreRaw {
			rec.Raw = le.Body
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return 0, nil
	}
	res, err := inbox.Insert(ctx, r.pool, recs, now)
	if err != nil {
		return 0, fmt.Errorf("ingest %d listed events: %w", len(recs), err)
	}
	var n int64
	for _, x := range res {
		if x == inbox.Accepted {
			n++
		}
	}
	return n, nil
}

// storable is the receiver's check that Postgres can store and index the
// event's identity (a refused row would fail the whole batch).
func storable(ev *provider.Event) error {
	for _, v := range []string{ev.ID, ev.Type, ev.ResourceType, ev.ResourceID} {
		if len(v) > maxIdentityLen || !utf8.ValidString(v) || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: identity Postgres cannot store", provider.ErrMalformed)
		}
	}
	return nil
}
