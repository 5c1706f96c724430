package projection

// changeHead + decision + changeTail (+ more conditions) + ")" is the CTE
// that turns a projection write into its change record, queued in the
// outbox by the statement that wrote the projection: the record exists
// exactly when the write committed, under the same fence check, and a
// refused or rolled-back write (stale, duplicate, fenced) has none. It reads
// the row as the upsert left it (the up CTE's RETURNING, changeReturning),
// so the record is the stored projection, not what the event proposed. $13
// is the resource's key, $14 the changes topic (empty: no record). The
// record's fields are message.Change's (schemas/change.schema.json).
//
// The outbox row's id is taken after the upsert locked the projection row,
// and the lock is held until commit, so a resource's change rows are
// numbered in the order of its writes; the relay publishes a change row
// only after every earlier row of its key left the outbox (its claimSQL).
const (
	changeHead = `change AS (
    INSERT INTO outbox (message_key, message, topic)
    SELECT $13, json_build_object(
        'provider', $1::text, 'source_account', $2::text, 'environment', $3::text,
        'resource_type', $4::text, 'resource_id', $5::text,
        'decision', '`
	changeTail = `', 'event_id', u.source_event_id, 'fence_generation', u.fence_generation,
        'provider_version', u.provider_version, 'fetch_seq', u.fetch_seq, 'fetched_at', u.fetched_at,
        'status', coalesce(u.status, ''), 'deleted', u.deleted, 'state', u.state,
        'changed_at', u.updated_at)::text, $14::text
    FROM up u
    WHERE $14::text <> ''`
	// changeReturning is what up returns for the change CTE.
	changeReturning = `RETURNING p.provider_version, p.state, p.status, p.deleted, p.source_event_id,
        p.fence_generation, p.fetch_seq, p.fetched_at, p.updated_at`
)
