package reconciler

import (
	"time"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Filter selects the sources of a round; empty fields select all.
type Filter struct {
	Provider      string
	SourceAccount string
	Environment   string
}

func (f Filter) empty() bool { return f == Filter{} }

func (f Filter) selects(s provider.Source) bool {
	return (f.Provider == "" || f.Provider == s.Provider) &&
		(f.SourceAccount == "" || f.SourceAccount == s.SourceAccount) &&
		(f.Environment == "" || f.Environment == s.Environment)
}

// Report is what one round found, as `hookyard reconcile` prints it.
type Report struct {
	StartedAt time.Time `json:"started_at"`
	// Enqueued counts every message the round put in the outbox: checks,
	// ingested events, re-published lost events.
	Enqueued int64 `json:"enqueued"`
	// Requeued are lost events re-published.
	Requeued int64 `json:"requeued"`
	// Parked are checks sent for parked projections.
	Parked  int64          `json:"parked_checks"`
	Sources []SourceReport `json:"sources"`
	Errors  []string       `json:"errors,omitempty"`
}

// SourceReport is what a round found for one source.
type SourceReport struct {
	Source        string `json:"source"`
	Provider      string `json:"provider"`
	SourceAccount string `json:"source_account"`
	Environment   string `json:"environment"`
	// Listings walked, each with how far it got.
	Listings []*ListingReport `json:"listings"`
	// Checks sent: stale projections and listed resources that diverged.
	Checks int64 `json:"checks_enqueued"`
	// Divergences are new rows of reconcile_divergence (a lasting one is
	// counted in the round that found it).
	Divergences int64 `json:"divergences"`
	// EventsIngested are listed events the inbox did not hold.
	EventsIngested int64 `json:"events_ingested"`
	// Redeliveries asked of the provider.
	Redeliveries int64 `json:"redeliveries_asked"`
	// RedeliveriesGivenUp are followed deliveries given up this round
	// (GivenUpRedeliveries lists them).
	RedeliveriesGivenUp int64    `json:"redeliveries_given_up"`
	Errors              []string `json:"errors,omitempty"`
}

// ListingReport is one listing's walk in a round.
type ListingReport struct {
	Listing string `json:"listing"`
	Pages   int    `json:"pages"`
	// Complete: the walk reached its end; otherwise the checkpoint keeps
	// its cursor and the next round resumes there.
	Complete bool `json:"complete"`
	// ResumedAt is the cursor the walk resumed from ("" from the start).
	ResumedAt string `json:"resumed_at,omitempty"`
	Error     string `json:"error,omitempty"`
}

func (s *SourceReport) listing(name string) *ListingReport {
	l := &ListingReport{Listing: name}
	s.Listings = append(s.Listings, l)
	return l
}
