package cli

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/pkg/config"
)

// lockedBuffer is a bytes.Buffer written by one goroutine and read by
// another.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func changeJSON(provider, account, typ, id, status string) string {
	return `{"provider":"` + provider + `","source_account":"` + account + `","environment":"test","resource_type":"` + typ +
		`","resource_id":"` + id + `","decision":"fetched","event_id":"evt","fence_generation":1,"provider_version":null,` +
		`"fetch_seq":1,"fetched_at":"2026-12-01T00:00:00+00:00","status":"` + status + `","deleted":false,` +
		"\n" + `"state": {"id": "` + id + `"},"changed_at":"2026-12-01T00:00:01+00:00"}`
}

// `changes tail -from-beginning` prints every change record of the changes
// topic that its filters select, one compact JSON line each, and skips what
// is not a change; it follows the topic until interrupted. Fails if a
// filter is ignored, a record spans lines, or a foreign record stops it.
func TestChangesTailPrintsTheSelectedChangesOneLineEach(t *testing.T) {
	t.Parallel()
	kc := kafkatest.New(t, 2)
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...), kgo.DefaultProduceTopic(kc.ChangesTopic))
	require.NoError(t, err)
	defer cl.Close()
	produce := func(key, value string) {
		t.Helper()
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Key: []byte(key), Value: []byte(value)}).FirstErr())
	}
	produce("stripe/acct_a/test/subscription/sub_1", changeJSON("stripe", "acct_a", "subscription", "sub_1", "active"))
	produce("stripe/acct_b/test/subscription/sub_2", changeJSON("stripe", "acct_b", "subscription", "sub_2", "active"))
	produce("stripe/acct_a/test/customer/cus_1", changeJSON("stripe", "acct_a", "customer", "cus_1", ""))
	produce("x", `{"kind":"event"}`)
	produce("stripe/acct_a/test/subscription/sub_3", changeJSON("stripe", "acct_a", "subscription", "sub_3", "canceled"))

	e := &env{cfg: &config.Config{KafkaBrokers: kc.Brokers, Kafka: config.Kafka{ChangesTopic: kc.ChangesTopic}},
		log: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- changesCmd(ctx, e, []string{"tail", "-account", "acct_a", "-type", "subscription", "-from-beginning"}, &out)
	}()
	require.Eventually(t, func() bool { return strings.Count(out.String(), "\n") >= 2 }, 20*time.Second, 10*time.Millisecond)
	// It keeps following: a later record shows up too.
	produce("stripe/acct_a/test/subscription/sub_1", changeJSON("stripe", "acct_a", "subscription", "sub_1", "past_due"))
	require.Eventually(t, func() bool { return strings.Count(out.String(), "\n") >= 3 }, 20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 3, out.String())
	var ids []string
	for _, l := range lines {
		require.True(t, strings.HasPrefix(l, `{"provider":"stripe","source_account":"acct_a"`), l)
		require.Contains(t, l, `"state":{"id":`, "compacted to one line")
		for _, id := range []string{"sub_1", "sub_3"} {
			if strings.Contains(l, `"resource_id":"`+id+`"`) {
				ids = append(ids, id)
			}
		}
	}
	require.ElementsMatch(t, []string{"sub_1", "sub_3", "sub_1"}, ids)
	require.Contains(t, lines[2], `"status":"past_due"`)

	require.ErrorIs(t, changesCmd(ctx, e, []string{"follow"}, &out), errUsage)
	require.ErrorIs(t, changesCmd(ctx, e, []string{"tail", "-nope"}, &out), errUsage)
}

// `changes republish` queues a change record of every stored projection,
// for the relays to publish: projections stored before changes were
// published reach the changes topic. Fails if it misses one across its
// batches or queues them for another topic than kafka.changes_topic.
func TestChangesRepublishQueuesEveryProjection(t *testing.T) {
	t.Parallel()
	s := dbtest.New(t)
	ctx := context.Background()
	_, err := s.Pool.Exec(ctx, `
INSERT INTO projection (provider, source_account, environment, resource_type, resource_id,
    provider_version, state, status, fence_generation)
SELECT 'chargebee', 'site', 'test', 'subscription', 'sub_' || g, g, '{"status":"active"}', 'active', 1
FROM generate_series(1, 5) g`)
	require.NoError(t, err)
	e := &env{cfg: &config.Config{Kafka: config.Kafka{ChangesTopic: "hookyard.changes.test"}}, pool: s.Pool,
		log: slog.New(slog.DiscardHandler)}
	var out bytes.Buffer
	require.NoError(t, changesCmd(ctx, e, []string{"republish", "-batch", "2"}, &out))
	require.JSONEq(t, `{"queued":5,"topic":"hookyard.changes.test"}`, out.String())
	var n int
	require.NoError(t, s.Pool.QueryRow(ctx, `SELECT count(DISTINCT message_key) FROM outbox
WHERE topic = 'hookyard.changes.test' AND message::jsonb->>'decision' = 'current'`).Scan(&n))
	require.Equal(t, 5, n)
	require.ErrorIs(t, changesCmd(ctx, e, []string{"republish", "-batch", "0"}, &out), errUsage)
}
