-- A vacuum of the ledger (webhook_inbox) leaves its empty tail pages in
-- place.
--
-- Retention forgets the identities past retention.identity_age in batches
-- and then vacuums the ledger, every pass. A vacuum that finds empty pages
-- at the table's end tries, by default, for up to 5 s to take an ACCESS
-- EXCLUSIVE lock on it and truncate them; once it has the lock, every
-- intake statement and every processor mark waits until it notices them.
-- The ledger takes new identities all the time, so the pages are needed
-- again at once. Retention's own VACUUM says TRUNCATE false as well, for
-- databases where this setting is changed back.
--
-- Online: the storage parameter takes a SHARE UPDATE EXCLUSIVE lock, which
-- intake, marks and retention's deletes do not wait for.

-- +goose Up
ALTER TABLE webhook_inbox SET (vacuum_truncate = false);

-- +goose Down
ALTER TABLE webhook_inbox RESET (vacuum_truncate);
