package processor_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/processor"
)

// changeRecord is a record of the changes topic with where it was.
type changeRecord struct {
	message.Change
	key       string
	partition int32
	offset    int64
}

// changes reads the whole changes topic from the beginning. Call it once
// the outbox is empty (WaitIdle): every change record is then acknowledged
// by the broker, so the topic's end offsets say how many there are.
func changes(t *testing.T, p *pipelinetest.Pipeline) []changeRecord {
	t.Helper()
	var out []changeRecord
	for _, r := range p.ChangeRecords(t) {
		c, err := message.DecodeChange(r.Value)
		require.NoError(t, err, "%s", r.Value)
		require.Equal(t, c.Resource.Key(), string(r.Key), "a change under another key than its resource's")
		out = append(out, changeRecord{Change: c, key: string(r.Key), partition: r.Partition, offset: r.Offset})
	}
	return out
}

// byKey groups records per key in their order on the topic (one key is on
// one partition; records of one partition come in offset order).
func byKey(recs []changeRecord) map[string][]changeRecord {
	out := map[string][]changeRecord{}
	for _, r := range recs {
		out[r.key] = append(out[r.key], r)
	}
	return out
}

// The changes topic, read from the beginning with only the last record of
// each key kept (what compaction leaves), is every projection. Chargebee
// snapshots and tombstones arrive reversed, duplicated and concurrently;
// Stripe hints are fetched while their subscriptions change; two processors
// share the group, a third joins and the first leaves mid-traffic; two
// relays run side by side. Afterwards every projection equals its key's
// last record, every record's key has a projection, and per key the
// versions (or fetch numbers) of the records strictly increase: no
// resource's changes reached the topic out of order. Fails without the
// change records in the projection statements, with a record that is not
// the stored row, or with relays that let a key's later change overtake an
// earlier one.
func TestChangeStreamRebuildsEveryProjectionAfterChaos(t *testing.T) {
	t.Parallel()
	// Small claims, several in flight: one resource's consecutive changes
	// are claimed by different relays at once.
	p := scNew(t, pipelinetest.Options{Partitions: 4, NoProcessor: true, Relays: 2,
		Relay: func(c *outboxrelay.Config) { c.BatchSize, c.InFlight = 3, 4 }})
	ctx := context.Background()
	_, stop1 := p.StartProcessor("c1", nil)
	_, _ = p.StartProcessor("c2", nil)

	const cbSubs, versions, stripeSubs, stripeRounds = 24, 6, 12, 4
	const posts = cbSubs*versions*2 + stripeSubs*stripeRounds
	var wg sync.WaitGroup
	var sent atomic.Int64
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range cbSubs {
		id := fmt.Sprintf("sub_cs_%02d", i)
		// Versions 1..V, each sent twice; every fourth subscription ends
		// deleted (a tombstone at V).
		var bodies [][]byte
		for v := 1; v <= versions; v++ {
			typ, status := "subscription_changed", []string{"in_trial", "active", "non_renewing", "active", "paused", "cancelled"}[v-1]
			if v == versions && i%4 == 0 {
				typ = "subscription_deleted"
			}
			b := scCBEvent(fmt.Sprintf("ev_cs_%02d_%d", i, v), typ, id, status, int64(v*10), time.Now().Unix()-int64(versions-v))
			bodies = append(bodies, b, b)
		}
		// In order (a change per version), reversed (one change), shuffled.
		switch i % 3 {
		case 1:
			slicesReverse(bodies)
		case 2:
			rng.Shuffle(len(bodies), func(a, b int) { bodies[a], bodies[b] = bodies[b], bodies[a] })
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range bodies {
				scPostCB(t, p, b)
				sent.Add(1)
			}
		}()
	}
	for i := range stripeSubs {
		id := fmt.Sprintf("sub_cs_stripe_%02d", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range stripeRounds {
				s := scSub(id, []string{"trialing", "active", "past_due", "canceled"}[r])
				p.Sim.Put(s)
				scSend(t, p, "customer.subscription.updated", s)
				sent.Add(1)
			}
		}()
	}
	// Mid-traffic, a third processor joins and the first leaves: two
	// rebalances while events flow.
	p.Eventually(func() bool { return sent.Load() >= posts/3 }, "a third of the traffic sent")
	_, _ = p.StartProcessor("c3", nil)
	p.Eventually(func() bool { return sent.Load() >= 2*posts/3 }, "two thirds of the traffic sent")
	stop1()
	wg.Wait()
	p.WaitIdle()

	recs := changes(t, p)
	keys := byKey(recs)
	t.Logf("%d change records for %d keys", len(recs), len(keys))
	for key, rs := range keys {
		for i := 1; i < len(rs); i++ {
			prev, cur := rs[i-1], rs[i]
			require.Equal(t, prev.partition, cur.partition, "%s on two partitions", key)
			if cur.Version != nil {
				require.NotNil(t, prev.Version, key)
				require.Greater(t, *cur.Version, *prev.Version, "%s: version %d after %d on the changes topic", key, *cur.Version, *prev.Version)
			} else {
				require.NotNil(t, prev.FetchSeq, key)
				require.Greater(t, *cur.FetchSeq, *prev.FetchSeq, "%s: fetch %d after %d on the changes topic", key, *cur.FetchSeq, *prev.FetchSeq)
			}
		}
	}

	// Compaction keeps the last record of each key: it is the projection.
	rows, err := p.Pool.Query(ctx, `SELECT provider, source_account, environment, resource_type, resource_id FROM projection`)
	require.NoError(t, err)
	var all []message.Resource
	for rows.Next() {
		var r message.Resource
		require.NoError(t, rows.Scan(&r.Provider, &r.SourceAccount, &r.Environment, &r.Type, &r.ID))
		all = append(all, r)
	}
	require.NoError(t, rows.Err())
	require.Len(t, all, cbSubs+stripeSubs)
	require.Len(t, keys, len(all), "keys on the changes topic")
	for _, r := range all {
		rs := keys[r.Key()]
		require.NotEmpty(t, rs, "no change record for %s", r.Key())
		last := rs[len(rs)-1]
		pr := scProjection(t, p, r)
		require.Equal(t, pr.Status, last.Status, r.Key())
		require.Equal(t, pr.Deleted, last.Deleted, r.Key())
		require.Equal(t, pr.Version, last.Version, r.Key())
		require.JSONEq(t, string(pr.State), string(last.State), r.Key())
		// A later fetch that found the same state wrote the row under a newer
		// generation, with no change to publish.
		require.LessOrEqual(t, last.FenceGeneration, pr.Generation, r.Key())
	}
	// What the traffic decided, so the comparison above is not between two
	// empty or stale sides.
	for i := range cbSubs {
		pr := scProjection(t, p, scCBRes(fmt.Sprintf("sub_cs_%02d", i)))
		require.Equal(t, int64(versions*10), *pr.Version)
		require.Equal(t, i%4 == 0, pr.Deleted)
	}
	for i := range stripeSubs {
		pr := scProjection(t, p, pipelinetest.Resource(fmt.Sprintf("sub_cs_stripe_%02d", i)))
		require.Equal(t, "canceled", pr.Status)
	}
}

func slicesReverse(s [][]byte) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

// A stale snapshot, a duplicate of the applied one and an equal-version
// conflict change no projection, and publish no change: the key's records
// are exactly the applied versions. Fails if the change record is queued
// for every write rather than for the writes that applied.
func TestStaleOrDuplicateEventPublishesNoChange(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	r := scCBRes("sub_cs_stale")
	now := time.Now().Unix()
	scPostCB(t, p, scCBEvent("ev_cs_20", "subscription_changed", r.ID, "active", 20, now))
	p.WaitIdle()
	scPostCB(t, p, scCBEvent("ev_cs_10", "subscription_changed", r.ID, "in_trial", 10, now-60))          // stale
	scPostCB(t, p, scCBEvent("ev_cs_20_again", "subscription_changed", r.ID, "active", 20, now))         // duplicate
	scPostCB(t, p, scCBEvent("ev_cs_20_other", "subscription_changed", r.ID, "non_renewing", 20, now-1)) // conflict
	p.WaitIdle()
	scPostCB(t, p, scCBEvent("ev_cs_30", "subscription_changed", r.ID, "cancelled", 30, now+1))
	p.WaitIdle()

	rs := byKey(changes(t, p))[r.Key()]
	var got []string
	for _, c := range rs {
		got = append(got, fmt.Sprintf("v%d %s %s", *c.Version, c.Status, c.EventID))
	}
	require.Equal(t, []string{"v20 active ev_cs_20", "v30 cancelled ev_cs_30"}, got)
	for _, id := range []string{"ev_cs_10", "ev_cs_20_again", "ev_cs_20_other"} {
		h := scHistoryOf(scHistory(t, p, r), id)
		require.Len(t, h, 1, id)
		require.NotEqual(t, projection.Applied, h[0].Outcome, id)
	}
}

// failingFetcher answers every fetch with an error: a processor that never
// writes the resource.
type failingFetcher struct{}

func (failingFetcher) Fetch(context.Context, message.Resource) (provider.Fetched, error) {
	return provider.Fetched{}, fmt.Errorf("%w: test provider down", provider.ErrNotAttempted)
}

// Invariant 6 for the changes topic: the change record is written in the
// transaction that checks the fence, so a worker that lost its partition
// publishes no change. Here the new owner cannot fetch (its provider is
// down) and writes nothing, so the zombie's write would be the resource's
// only change: it must be refused, and the changes topic hold nothing for
// the resource. Fails if the fence check, or the record's place in the
// fenced transaction, is removed.
func TestFencedOutWorkerPublishesNoChange(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true})
	ctx := context.Background()
	res := pipelinetest.Resource("sub_cs_zombie")
	s := scSub("sub_cs_zombie", "active")
	p.Sim.Put(s)

	gate := &gatedFetcher{inner: stripe.Fetcher{Client: p.Stripe}, fetched: make(chan string, 1), release: make(chan struct{})}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(gate.release) }) }
	t.Cleanup(release)
	regA := prometheus.NewRegistry()
	_, stopA := p.StartProcessor("cs-zombie", func(c *processor.Config) {
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: gate}
		c.Registerer = regA
		c.RevokeGrace = 200 * time.Millisecond
	})
	scSend(t, p, "customer.subscription.updated", s)
	select {
	case <-gate.fetched:
	case <-time.After(30 * time.Second):
		t.Fatal("zombie never fetched")
	}
	stopA()
	_, _ = p.StartProcessor("cs-new-owner", func(c *processor.Config) {
		c.Fetchers = map[string]provider.Fetcher{provider.Stripe: failingFetcher{}}
	})
	p.Eventually(func() bool {
		var n int
		err := p.Pool.QueryRow(ctx, `SELECT count(*) FROM partition_fence WHERE owner = 'cs-new-owner'`).Scan(&n)
		return err == nil && n == 1
	}, "new owner holds the partition")

	release()
	p.Eventually(func() bool { return counterValue(t, regA, "hookyard_processor_fenced_writes_total") == 1 },
		"zombie's write refused by the fence")
	_, ok := p.Projection(res)
	require.False(t, ok, "the zombie wrote the projection")
	// A change row is in the outbox until the broker acknowledged it (a
	// claim's delete is not visible before it commits): in neither place,
	// it was never written.
	var queued int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE message_key = $1 AND topic IS NOT NULL`, res.Key()).Scan(&queued))
	require.Zero(t, queued, "a fenced-out worker's write queued a change")
	require.Empty(t, byKey(changes(t, p))[res.Key()], "a fenced-out worker's write was published")
}

// With the change stream off (changes.publish: false makes the processor's
// ChangesTopic empty) an applied write queues no change record: the outbox
// only ever holds the events' own rows, and the changes topic stays empty.
// Fails if the projection's write queues its change record whatever the
// topic.
func TestChangeStreamOffWritesNoChangeRecord(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.ChangesTopic = "" }})
	// Every outbox row that names a topic of its own is noted as it is
	// inserted: the relay takes rows out within milliseconds.
	for _, q := range []string{
		`CREATE TABLE seen_change (id bigint)`,
		`CREATE FUNCTION note_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO seen_change VALUES (NEW.id); RETURN NEW; END $$`,
		`CREATE TRIGGER note_change AFTER INSERT ON outbox FOR EACH ROW WHEN (NEW.topic IS NOT NULL) EXECUTE FUNCTION note_change()`,
	} {
		_, err := p.Pool.Exec(t.Context(), q)
		require.NoError(t, err, q)
	}
	r := scCBRes("sub_cs_off")
	now := time.Now().Unix()
	scPostCB(t, p, scCBEvent("ev_off_1", "subscription_changed", r.ID, "active", 1, now))
	scPostCB(t, p, scCBEvent("ev_off_2", "subscription_changed", r.ID, "cancelled", 2, now+1))
	p.WaitIdle()
	h := scHistory(t, p, r)
	require.Equal(t, projection.Applied, scHistoryOf(h, "ev_off_2")[0].Outcome, "the writes were applied")
	var rows int
	require.NoError(t, p.Pool.QueryRow(t.Context(), `SELECT count(*) FROM seen_change`).Scan(&rows))
	require.Zero(t, rows)
	require.Empty(t, changes(t, p), "nothing on the changes topic")
}

// Events and change records reach Kafka while the relays sit idle: the
// outbox's trigger notifies for neither intake's rows nor change records,
// and the receiver and the processor wake the relays after the commits
// that wrote them (package outbox), never from inside them. The relay here
// polls once an hour, so each event and each change record must be woken
// for. Fails without the receiver's or the processor's notification after
// its commit.
func TestChangeRecordWakesAnIdleRelay(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{Relay: func(c *outboxrelay.Config) { c.PollInterval = time.Hour }})
	r := scCBRes("sub_cs_wake")
	now := time.Now().Unix()
	for i, status := range []string{"active", "non_renewing", "cancelled"} {
		scPostCB(t, p, scCBEvent(fmt.Sprintf("ev_cs_wake_%d", i), "subscription_changed", r.ID, status, int64(10*(i+1)), now+int64(i)))
		p.WaitIdle() // the outbox is empty: the change record went out
	}
	var got []string
	for _, c := range byKey(changes(t, p))[r.Key()] {
		got = append(got, c.Status)
	}
	require.Equal(t, []string{"active", "non_renewing", "cancelled"}, got)
}
