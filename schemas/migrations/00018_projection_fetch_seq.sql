-- Fetched-write order that survives a clock moved back.
--
-- subscription_projection.fetched_at is the database's wall clock when a
-- fetch started. After a failover to a primary whose clock is behind, a
-- fresh fetch could read an earlier time than the one stored and be refused
-- as stale. projection_fetch_seq numbers fetch starts instead: a sequence
-- never goes back, and a promoted standby continues it past every value
-- whose write it received (sequence WAL is logged ahead of the values
-- handed out). fetch_seq is the number of the fetch that wrote the row; a
-- fetched write with a lower number does not overwrite it. Rows written
-- before this migration have none, and keep the fetched_at compare until
-- their next fetched write.

-- +goose Up
CREATE SEQUENCE projection_fetch_seq;
ALTER TABLE subscription_projection ADD COLUMN fetch_seq bigint;

-- +goose Down
ALTER TABLE subscription_projection DROP COLUMN fetch_seq;
DROP SEQUENCE projection_fetch_seq;
