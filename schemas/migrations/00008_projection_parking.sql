-- Why a projection is parked for reconciliation, since when, and when the
-- reconciler last sent a check for it.
--
-- needs_reconcile already exists (00001); IF NOT EXISTS keeps this
-- migration valid whichever migration added it first.
-- needs_reconcile_reason: the latest cause in words ("version gap: ...",
-- "version conflict: ...", "unordered: ...").
-- parked_at: when the projection was parked (kept while it stays parked).
-- reconcile_checked_at: when the reconciler last sent a check for it; NULL
-- means no check yet. A parked projection is checked once per parking (and
-- counted once as a divergence); only providers whose checks can fetch the
-- resource are checked again, so a parked resource of a provider without an
-- API client is neither re-checked nor re-counted every round.

-- +goose Up
ALTER TABLE subscription_projection ADD COLUMN IF NOT EXISTS needs_reconcile boolean NOT NULL DEFAULT false;
ALTER TABLE subscription_projection ADD COLUMN IF NOT EXISTS needs_reconcile_reason text;
ALTER TABLE subscription_projection ADD COLUMN IF NOT EXISTS parked_at timestamptz;
ALTER TABLE subscription_projection ADD COLUMN IF NOT EXISTS reconcile_checked_at timestamptz;

-- +goose Down
ALTER TABLE subscription_projection DROP COLUMN IF EXISTS reconcile_checked_at;
ALTER TABLE subscription_projection DROP COLUMN IF EXISTS parked_at;
ALTER TABLE subscription_projection DROP COLUMN IF EXISTS needs_reconcile_reason;
