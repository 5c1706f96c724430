package replay_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/replay"
	"github.com/hookyard/hookyard/pkg/provider"
)

var ep = &provider.Endpoint{ID: "stripe-test", Provider: provider.Stripe, SourceAccount: "acct_r", Environment: "test"}

func res(id string) message.Resource {
	return message.Resource{Provider: ep.Provider, SourceAccount: ep.SourceAccount, Environment: ep.Environment, Type: "subscription", ID: id}
}

func evKey(id string) inbox.Key {
	return inbox.Key{Provider: ep.Provider, SourceAccount: ep.SourceAccount, Environment: ep.Environment, EventID: id}
}

func eventMsg(t *testing.T, eventID, sub string) []byte {
	t.Helper()
	b, err := json.Marshal(message.Message{Kind: message.KindEvent, Resource: res(sub), EventID: eventID,
		EventType: "customer.subscription.updated", EndpointID: ep.ID, Reason: message.ReasonWebhook})
	require.NoError(t, err)
	return b
}

func checkMsg(t *testing.T, sub string) []byte {
	t.Helper()
	b, err := json.Marshal(message.Message{Kind: message.KindCheck, Resource: res(sub), Reason: message.ReasonReconcile})
	require.NoError(t, err)
	return b
}

// produce writes values to one partition, in order, stamped at ts (now
// when zero).
func produce(t *testing.T, kc *kafkatest.Cluster, partition int32, ts time.Time, values ...[]byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...), kgo.DefaultProduceTopic(kc.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	for _, v := range values {
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Partition: partition, Value: v, Timestamp: ts}).FirstErr())
	}
}

// seed stores events as the processor leaves them (processed, outbox
// drained) and one ignored event.
func seed(t *testing.T, pool *pgxpool.Pool, ids ...string) {
	t.Helper()
	var recs []*inbox.Record
	for _, id := range ids {
		recs = append(recs, &inbox.Record{Endpoint: ep, Event: provider.Event{ID: id, Type: "customer.subscription.updated",
			ResourceType: "subscription", ResourceID: "sub_" + id, Payload: []byte(`{}`)}})
	}
	recs = append(recs, &inbox.Record{Endpoint: ep, Ignored: true, Event: provider.Event{ID: "e_ign", Type: "customer.created",
		ResourceType: "subscription", ResourceID: "sub_ign", Payload: []byte(`{}`)}})
	_, err := inbox.Insert(t.Context(), pool, recs, time.Now())
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `UPDATE webhook_inbox SET status = 'processed', processed_at = now() WHERE status = 'pending'`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `DELETE FROM outbox`)
	require.NoError(t, err)
}

func outboxEvents(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT coalesce(message::jsonb->>'event_id', message::jsonb->>'kind' || ':' || (message::jsonb->>'resource_id'))
FROM outbox ORDER BY id`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

func i64(v int64) *int64 { return &v }

func newReplayer(t *testing.T, pool *pgxpool.Pool, kc *kafkatest.Cluster) *replay.Replayer {
	t.Helper()
	r, err := replay.New(pool, pipelinetest.Logger(t), replay.Config{Brokers: kc.Brokers, Topic: kc.Topic, IdleTimeout: 5 * time.Second})
	require.NoError(t, err)
	return r
}

// A replay reads exactly [from-offset, to-offset) of its partition: events
// are reset and re-enqueued once each, checks written again as they are,
// and everything else is counted with its reason.
func TestReplayReadsOnlyItsRangeAndSaysWhatItSkipped(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 3)
	pool := dbtest.New(t).Pool
	seed(t, pool, "e0", "e1", "e2", "e3")
	produce(t, kc, 1, time.Time{},
		eventMsg(t, "e0", "sub_e0"),       // 0: before from-offset
		eventMsg(t, "e1", "sub_e1"),       // 1
		[]byte(`{"not":"a message"}`),     // 2
		eventMsg(t, "e0", "sub_e0"),       // 3: first copy this run reads
		eventMsg(t, "e_missing", "sub_x"), // 4
		eventMsg(t, "e_ign", "sub_ign"),   // 5
		checkMsg(t, "sub_chk"),            // 6
		checkMsg(t, "sub_chk"),            // 7
		eventMsg(t, "e1", "sub_e1"),       // 8: a second copy of e1
		eventMsg(t, "e3", "sub_e3"),       // 9: at to-offset, excluded
	)
	produce(t, kc, 0, time.Time{}, eventMsg(t, "e2", "sub_e2"))

	rep, err := newReplayer(t, pool, kc).Replay(t.Context(), replay.Request{Partition: 1, FromOffset: i64(1), ToOffset: i64(9)})
	require.NoError(t, err)
	require.Equal(t, replay.Report{Topic: kc.Topic, Partition: 1, Partitions: 3, StartOffset: 1, EndOffset: 9, NextOffset: 9,
		Complete: true, Read: 8, Replayed: 3, ReplayedEvents: 2, ReplayedOther: 1,
		Skipped: map[string]int{replay.SkipUndecodable: 1, replay.SkipDuplicate: 2, inbox.SkipNotInInbox: 1, inbox.SkipIgnored: 1}}, rep)
	require.ElementsMatch(t, []string{"e1", "e0", "check:sub_chk"}, outboxEvents(t, pool))
	for id, want := range map[string]string{"e0": inbox.StatusPending, "e1": inbox.StatusPending, "e2": inbox.StatusProcessed,
		"e3": inbox.StatusProcessed, "e_ign": inbox.StatusIgnored} {
		row, err := inbox.Get(t.Context(), pool, evKey(id), false)
		require.NoError(t, err)
		require.Equal(t, want, row.Status, id)
	}
	var check message.Message
	var raw []byte
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT message::text FROM outbox WHERE message::jsonb->>'kind' = 'check'`).Scan(&raw))
	check, err = message.Decode(raw)
	require.NoError(t, err)
	require.Equal(t, res("sub_chk"), check.Resource)
	require.Equal(t, message.ReasonReplay, check.Reason)
}

// Without to-offset a replay stops at the high watermark it saw when it
// started; a limit stops it early and says where to resume.
func TestReplayStopsAtTheHighWatermarkOrTheLimit(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 2)
	pool := dbtest.New(t).Pool
	seed(t, pool, "a", "b", "c")
	produce(t, kc, 0, time.Time{}, eventMsg(t, "a", "sub_a"), eventMsg(t, "b", "sub_b"), eventMsg(t, "c", "sub_c"))
	r := newReplayer(t, pool, kc)

	rep, err := r.Replay(t.Context(), replay.Request{Partition: 0, FromOffset: i64(0), Limit: 2})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Read)
	require.Equal(t, 2, rep.Replayed)
	require.EqualValues(t, 2, rep.NextOffset)
	require.EqualValues(t, 3, rep.EndOffset)
	require.False(t, rep.Complete)
	require.Equal(t, []string{"a", "b"}, outboxEvents(t, pool))

	rep, err = r.Replay(t.Context(), replay.Request{Partition: 0, FromOffset: i64(rep.NextOffset)})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Read)
	require.True(t, rep.Complete)
	require.EqualValues(t, 3, rep.NextOffset)

	// A from-offset past the end reads nothing and says so.
	rep, err = r.Replay(t.Context(), replay.Request{Partition: 0, FromOffset: i64(40)})
	require.NoError(t, err)
	require.Equal(t, 0, rep.Read)
	require.True(t, rep.Complete)
	// An empty partition too, without waiting for records.
	rep, err = r.Replay(t.Context(), replay.Request{Partition: 1, FromOffset: i64(0)})
	require.NoError(t, err)
	require.Equal(t, 0, rep.Read)
	require.EqualValues(t, 0, rep.EndOffset)
}

// since resolves to the first record stamped at or after it.
func TestReplaySinceStartsAtTheFirstRecordPublishedAfterIt(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 1)
	pool := dbtest.New(t).Pool
	seed(t, pool, "old", "mid", "new")
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	produce(t, kc, 0, base, eventMsg(t, "old", "sub_old"))
	produce(t, kc, 0, base.Add(10*time.Minute), eventMsg(t, "mid", "sub_mid"))
	produce(t, kc, 0, base.Add(20*time.Minute), eventMsg(t, "new", "sub_new"))
	r := newReplayer(t, pool, kc)

	rep, err := r.Replay(t.Context(), replay.Request{Partition: 0, Since: base.Add(5 * time.Minute)})
	require.NoError(t, err)
	require.EqualValues(t, 1, rep.StartOffset)
	require.Equal(t, 2, rep.Read)
	require.Equal(t, []string{"mid", "new"}, outboxEvents(t, pool))

	rep, err = r.Replay(t.Context(), replay.Request{Partition: 0, Since: time.Now().Add(time.Minute)})
	require.NoError(t, err)
	require.Equal(t, 0, rep.Read, "nothing was published after a time in the future")
	require.True(t, rep.Complete)
}

func TestReplayRefusesInvalidRequestsNamingTheField(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 4)
	pool := dbtest.New(t).Pool
	r := newReplayer(t, pool, kc)
	ctx := t.Context()

	_, err := r.Replay(ctx, replay.Request{Partition: 4, FromOffset: i64(0)})
	require.ErrorIs(t, err, replay.ErrInvalid)
	require.ErrorContains(t, err, "partition 4 is out of range: topic "+kc.Topic+" has 4 partitions (0-3)")
	for msg, req := range map[string]replay.Request{
		"from-offset or a since time":      {Partition: 0},
		"not both":                         {Partition: 0, FromOffset: i64(0), Since: time.Now()},
		"partition must be 0 or more":      {Partition: -1, FromOffset: i64(0)},
		"from-offset must be 0 or more":    {Partition: 0, FromOffset: i64(-2)},
		"must be greater than from-offset": {Partition: 0, FromOffset: i64(5), ToOffset: i64(5)},
		"limit must be":                    {Partition: 0, FromOffset: i64(0), Limit: -1},
	} {
		_, err := r.Replay(ctx, req)
		require.ErrorIs(t, err, replay.ErrInvalid, msg)
		require.ErrorContains(t, err, msg)
	}
	other, err := replay.New(pool, pipelinetest.Logger(t), replay.Config{Brokers: kc.Brokers, Topic: "no.such.topic"})
	require.NoError(t, err)
	_, err = other.Replay(ctx, replay.Request{Partition: 0, FromOffset: i64(0)})
	require.ErrorIs(t, err, replay.ErrUnknownTopic)

	_, err = replay.New(pool, pipelinetest.Logger(t), replay.Config{Topic: kc.Topic})
	require.ErrorContains(t, err, "Brokers is required")
}

// When writing a batch fails (the database refused it), the report's
// next_offset is the first offset of that batch, not past it: resuming from
// it replays what was not written. Fails if next_offset runs ahead of the
// writes.
func TestReplayThatFailsToWriteResumesAtTheUnwrittenBatch(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 1)
	pool := dbtest.New(t).Pool
	ids := []string{"e0", "e1", "e2", "e3", "e4", "e5"}
	seed(t, pool, ids...)
	var msgs [][]byte
	for _, id := range ids {
		msgs = append(msgs, eventMsg(t, id, "sub_"+id))
	}
	produce(t, kc, 0, time.Time{}, msgs...)
	_, err := pool.Exec(t.Context(), `
CREATE FUNCTION refuse_e3() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.message::jsonb->>'event_id' = 'e3' THEN RAISE EXCEPTION 'refused'; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER refuse_e3 BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION refuse_e3();`)
	require.NoError(t, err)

	r, err := replay.New(pool, pipelinetest.Logger(t), replay.Config{Brokers: kc.Brokers, Topic: kc.Topic,
		IdleTimeout: 5 * time.Second, BatchSize: 2})
	require.NoError(t, err)
	rep, err := r.Replay(t.Context(), replay.Request{Partition: 0, FromOffset: i64(0)})
	require.Error(t, err)
	require.False(t, rep.Complete)
	require.LessOrEqual(t, rep.NextOffset, int64(3), "resume no later than e3, which was never written")

	_, err = pool.Exec(t.Context(), `DROP TRIGGER refuse_e3 ON outbox`)
	require.NoError(t, err)
	rep, err = r.Replay(t.Context(), replay.Request{Partition: 0, FromOffset: i64(rep.NextOffset)})
	require.NoError(t, err)
	require.True(t, rep.Complete)
	require.ElementsMatch(t, ids, outboxEvents(t, pool), "every event replayed once over the two runs")
}
