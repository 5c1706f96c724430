package replay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/replay"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

const (
	cbEndpoint = "cb"
	cbSite     = "site"
)

func cbPipeline(t *testing.T) *pipelinetest.Pipeline {
	t.Helper()
	return pipelinetest.New(t, pipelinetest.Options{Partitions: 4, Endpoints: []provider.Endpoint{
		{ID: cbEndpoint, Provider: provider.Chargebee, SourceAccount: cbSite, Environment: "test", Secrets: []string{"u:p"}},
	}})
}

func cbRes(sub string) message.Resource {
	return message.Resource{Provider: provider.Chargebee, SourceAccount: cbSite, Environment: "test", Type: "subscription", ID: sub}
}

func cbEventID(sub string, version int64) string { return fmt.Sprintf("ev_%s_v%d", sub, version) }

// postCB sends a signed Chargebee snapshot of sub at version.
func postCB(t *testing.T, p *pipelinetest.Pipeline, sub, status string, version int64) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"id": cbEventID(sub, version), "event_type": "subscription_changed", "occurred_at": version, "api_version": "v2", "object": "event",
		"content": map[string]any{"subscription": map[string]any{
			"id": sub, "customer_id": "cus_" + sub, "status": status, "resource_version": version,
		}},
	})
	require.NoError(t, err)
	h := http.Header{}
	h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth("u", "p"))
	code, resp := p.PostSigned(cbEndpoint, body, h)
	require.Equal(t, http.StatusOK, code, resp)
}

// historyOf returns the event's history entries, newest first.
func historyOf(t *testing.T, p *pipelinetest.Pipeline, sub, eventID string) []projection.HistoryEntry {
	t.Helper()
	h, err := projection.History(context.Background(), p.Pool, cbRes(sub), 100)
	require.NoError(t, err)
	var out []projection.HistoryEntry
	for _, e := range h {
		if e.EventID == eventID {
			out = append(out, e)
		}
	}
	return out
}

type placed struct {
	offset  int64
	sub     string
	eventID string
}

// layout reads the n records the pipeline published and groups them by
// partition, in offset order.
func layout(t *testing.T, p *pipelinetest.Pipeline, n int) map[int32][]placed {
	t.Helper()
	recs := p.Records(n)
	require.Len(t, recs, n)
	out := map[int32][]placed{}
	for _, r := range recs {
		m, err := message.Decode(r.Value)
		require.NoError(t, err)
		out[r.Partition] = append(out[r.Partition], placed{offset: r.Offset, sub: m.ID, eventID: m.EventID})
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i].offset < ps[j].offset })
	}
	return out
}

func generations(t *testing.T, p *pipelinetest.Pipeline) map[int32]int64 {
	t.Helper()
	rows, err := p.Pool.Query(context.Background(), `SELECT partition, generation FROM partition_fence WHERE topic = $1`, p.Kafka.Topic)
	require.NoError(t, err)
	out := map[int32]int64{}
	for rows.Next() {
		var part int32
		var gen int64
		require.NoError(t, rows.Scan(&part, &gen))
		out[part] = gen
	}
	require.NoError(t, rows.Err())
	return out
}

// Replaying a partition from an offset makes the processor handle exactly
// those events again (a second history entry each), while the consumer
// group keeps every partition (no rebalance: fencing generations unchanged)
// and another partition keeps flowing. Older snapshots replayed after newer
// ones are recorded as stale: no projection moves backwards.
func TestReplayPartitionFromAnOffsetReprocessesItsEventsAndNothingMovesBack(t *testing.T) {
	t.Parallel()
	p := cbPipeline(t)
	subs := make([]string, 12)
	for i := range subs {
		subs[i] = fmt.Sprintf("sub_%02d", i)
		postCB(t, p, subs[i], "active", 1)
	}
	p.WaitIdle()
	for _, s := range subs {
		postCB(t, p, s, "cancelled", 2)
	}
	p.WaitIdle()

	parts := layout(t, p, 2*len(subs))
	var target int32 = -1
	for part, ps := range parts {
		if target < 0 || len(ps) > len(parts[target]) {
			target = part
		}
	}
	recs := parts[target]
	require.GreaterOrEqual(t, len(recs), 4, "the busiest partition holds at least two resources")
	from := recs[1].offset // the first record stays out of the replay
	replayed, kept := map[string]placed{}, map[string]placed{}
	for part, ps := range parts {
		for _, pl := range ps {
			if part == target && pl.offset >= from {
				replayed[pl.eventID] = pl
			} else {
				kept[pl.eventID] = pl
			}
		}
	}
	var live string
	for part, ps := range parts {
		if part != target {
			live = ps[0].sub
		}
	}
	require.NotEmpty(t, live, "some resource lives on another partition")
	gens := generations(t, p)
	require.Len(t, gens, 4)

	r, err := replay.New(p.Pool, p.Log, replay.Config{Brokers: p.Kafka.Brokers, Topic: p.Kafka.Topic})
	require.NoError(t, err)
	rep, err := r.Replay(t.Context(), replay.Request{Partition: target, FromOffset: &from})
	require.NoError(t, err)
	// Exactly the records that were there at the start, although the relay
	// appends the replays to this very partition meanwhile.
	require.Equal(t, len(replayed), rep.Read, "%+v", rep)
	require.Equal(t, len(replayed), rep.ReplayedEvents, "%+v", rep)
	require.Empty(t, rep.Skipped)
	require.True(t, rep.Complete)
	require.Equal(t, recs[len(recs)-1].offset+1, rep.EndOffset)

	// Live traffic on another partition flows while the replays go through.
	postCB(t, p, live, "active", 3)
	p.Eventually(func() bool {
		pr, ok := p.Projection(cbRes(live))
		return ok && pr.Version != nil && *pr.Version == 3
	}, "live event on another partition applied")

	p.Eventually(func() bool {
		for id, pl := range replayed {
			if len(historyOf(t, p, pl.sub, id)) < 2 {
				return false
			}
		}
		return true
	}, "every replayed event handled again")
	p.WaitIdle()

	for id, pl := range replayed {
		h := historyOf(t, p, pl.sub, id)
		require.Len(t, h, 2, id)
		want := projection.Duplicate
		if id == cbEventID(pl.sub, 1) {
			want = projection.Stale
		}
		require.Equal(t, want, h[0].Outcome, "replay of %s", id)
		row, err := inbox.Get(t.Context(), p.Pool, inbox.Key{Provider: provider.Chargebee, SourceAccount: cbSite, Environment: "test", EventID: id}, false)
		require.NoError(t, err)
		require.Equal(t, inbox.StatusProcessed, row.Status, id)
	}
	for id, pl := range kept {
		require.Len(t, historyOf(t, p, pl.sub, id), 1, "%s was not in the replayed range", id)
	}
	for _, pl := range recs {
		pr, ok := p.Projection(cbRes(pl.sub))
		require.True(t, ok)
		require.EqualValues(t, 2, *pr.Version, "%s did not move back", pl.sub)
		require.Equal(t, "cancelled", pr.Status, pl.sub)
	}
	require.Equal(t, gens, generations(t, p), "the replay never joined the group: no partition changed hands")
}

// A replay since a time starts at the first record the relay published
// after it: later events are handled again, earlier ones are not.
func TestReplayPartitionSinceATimeReprocessesOnlyLaterEvents(t *testing.T) {
	t.Parallel()
	p := cbPipeline(t)
	subs := make([]string, 8)
	for i := range subs {
		subs[i] = fmt.Sprintf("sub_t%d", i)
		postCB(t, p, subs[i], "active", 1)
	}
	p.WaitIdle()
	time.Sleep(50 * time.Millisecond)
	since := time.Now()
	time.Sleep(50 * time.Millisecond)
	for _, s := range subs {
		postCB(t, p, s, "cancelled", 2)
	}
	p.WaitIdle()

	parts := layout(t, p, 2*len(subs))
	var target int32 = -1
	for part, ps := range parts {
		if target < 0 || len(ps) > len(parts[target]) {
			target = part
		}
	}
	r, err := replay.New(p.Pool, p.Log, replay.Config{Brokers: p.Kafka.Brokers, Topic: p.Kafka.Topic})
	require.NoError(t, err)
	rep, err := r.Replay(t.Context(), replay.Request{Partition: target, Since: since})
	require.NoError(t, err)
	require.Equal(t, len(parts[target])/2, rep.ReplayedEvents, "%+v", rep)

	var later []placed
	for _, pl := range parts[target] {
		if pl.eventID == cbEventID(pl.sub, 2) {
			later = append(later, pl)
		}
	}
	p.Eventually(func() bool {
		for _, pl := range later {
			if len(historyOf(t, p, pl.sub, pl.eventID)) < 2 {
				return false
			}
		}
		return true
	}, "events published after since handled again")
	p.WaitIdle()
	for _, pl := range parts[target] {
		n := len(historyOf(t, p, pl.sub, pl.eventID))
		if pl.eventID == cbEventID(pl.sub, 2) {
			require.Equal(t, 2, n, pl.eventID)
		} else {
			require.Equal(t, 1, n, "%s was published before since", pl.eventID)
		}
		pr, ok := p.Projection(cbRes(pl.sub))
		require.True(t, ok)
		require.EqualValues(t, 2, *pr.Version)
	}
}

// A reconciler's check read from the partition goes back as the same check:
// the processor fetches the resource again.
func TestReplayPartitionSendsChecksBackAsChecks(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 2})
	sub := pipelinetest.Resource("sub_chk")
	p.Sim.Put(stripeSub("sub_chk", "active"))
	n, err := inbox.EnqueueMessages(t.Context(), p.Pool, []message.Message{{Kind: message.KindCheck, Resource: sub, Reason: message.ReasonReconcile}})
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	fetched := func() int {
		h, err := projection.History(context.Background(), p.Pool, sub, 100)
		require.NoError(t, err)
		c := 0
		for _, e := range h {
			if e.Outcome == projection.Fetched {
				c++
			}
		}
		return c
	}
	p.Eventually(func() bool { return fetched() == 1 }, "check handled")
	recs := p.Records(1)
	require.Len(t, recs, 1)
	p.Sim.Put(stripeSub("sub_chk", "canceled"))

	r, err := replay.New(p.Pool, p.Log, replay.Config{Brokers: p.Kafka.Brokers, Topic: p.Kafka.Topic})
	require.NoError(t, err)
	rep, err := r.Replay(t.Context(), replay.Request{Partition: recs[0].Partition, FromOffset: &recs[0].Offset})
	require.NoError(t, err)
	require.Equal(t, 1, rep.ReplayedOther, "%+v", rep)
	p.Eventually(func() bool { return fetched() == 2 }, "replayed check fetched again")
	pr, ok := p.Projection(sub)
	require.True(t, ok)
	require.Equal(t, "canceled", pr.Status)
}

func stripeSub(id, status string) stripesim.Subscription {
	return stripesim.Subscription{ID: id, Customer: "cus_" + id, Status: status, CurrentPeriodEnd: time.Now().Add(time.Hour).Unix()}
}
