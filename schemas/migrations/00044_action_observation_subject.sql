-- explain lists the actions a resource's observations caused: the effects
-- of its transitions (subject "<type>/<id>@v<version>" or "@f<fetch seq>")
-- and its changes' deliveries to subscribers (the same form). They are
-- found by their subject's prefix "<type>/<id>@". The primary key cannot
-- serve a prefix in every collation (a linguistic one does not sort the
-- strings of a prefix together), so this index compares bytes (COLLATE
-- "C"), and holds only subjects of that form: not the receipts, whose
-- subject is an invoice id.

-- +goose Up
CREATE INDEX IF NOT EXISTS action_observation_subject
    ON action (provider, source_account, environment, (subject_id COLLATE "C"))
    WHERE strpos(subject_id, '@') > 0;

-- +goose Down
DROP INDEX IF EXISTS action_observation_subject;
