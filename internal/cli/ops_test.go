package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/cli"
	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
)

// cliEnv points the binary at a test schema (and Kafka, when brokers are
// given) through its environment, the way an operator's shell does. Tests
// that use it cannot run in parallel: the environment is the process's.
type cliEnv struct {
	t      *testing.T
	schema *dbtest.Schema
	config string
}

func newCLIEnv(t *testing.T, kc *kafkatest.Cluster) *cliEnv {
	t.Helper()
	s := dbtest.New(t)
	u, err := url.Parse(dbtest.URL())
	require.NoError(t, err)
	q := u.Query()
	q.Set("search_path", s.Name)
	u.RawQuery = q.Encode()
	t.Setenv("DATABASE_URL", u.String())
	topic, group, brokers := kafkatest.Topic, "test-processors", []string(nil)
	if kc != nil {
		topic, group, brokers = kc.Topic, kc.Group, kc.Brokers
	}
	t.Setenv("KAFKA_BROKERS", strings.Join(brokers, ","))
	t.Setenv("LOG_LEVEL", "error")
	cfg := filepath.Join(t.TempDir(), "hookyard.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("endpoints: []\nkafka:\n  topic: "+topic+"\n  group: "+group+"\n"), 0o600))
	return &cliEnv{t: t, schema: s, config: cfg}
}

// run runs `hookyard args...` and returns its exit code, stdout and stderr.
func (e *cliEnv) run(args ...string) (int, string, string) {
	e.t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := cli.Main(ctx, append([]string{"-config", e.config}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func (e *cliEnv) runJSON(out any, args ...string) {
	e.t.Helper()
	code, stdout, stderr := e.run(args...)
	require.Equal(e.t, 0, code, "hookyard %s: %s", strings.Join(args, " "), stderr)
	require.NoError(e.t, json.Unmarshal([]byte(stdout), out), stdout)
}

func (e *cliEnv) status(id string) string {
	e.t.Helper()
	r, err := inbox.Get(e.t.Context(), e.schema.Pool, inbox.Key{Provider: provider.Stripe, SourceAccount: "acct_a", Environment: "test", EventID: id}, false)
	require.NoError(e.t, err)
	return r.Status
}

var cliEP = &provider.Endpoint{ID: "stripe-test", Provider: provider.Stripe, SourceAccount: "acct_a", Environment: "test"}

// seed stores events evt_1 (dead, invoice.paid), evt_2 (dead, subscription
// update), evt_ok (processed) and cb_1 (dead, another provider).
func (e *cliEnv) seed() {
	e.t.Helper()
	cb := &provider.Endpoint{ID: "cb-test", Provider: provider.Chargebee, SourceAccount: "site_b", Environment: "live"}
	rec := func(ep *provider.Endpoint, id, typ string) *inbox.Record {
		return &inbox.Record{Endpoint: ep, Event: provider.Event{ID: id, Type: typ, ResourceType: "subscription", ResourceID: "sub_1",
			Payload: []byte(`{"id":"` + id + `"}`)}}
	}
	_, err := inbox.Insert(e.t.Context(), e.schema.Pool, []*inbox.Record{
		rec(cliEP, "evt_1", "invoice.paid"), rec(cliEP, "evt_2", "customer.subscription.updated"),
		rec(cliEP, "evt_ok", "customer.subscription.updated"), rec(cb, "cb_1", "subscription_changed"),
	}, time.Now())
	require.NoError(e.t, err)
	for _, q := range []string{
		`DELETE FROM outbox`,
		`UPDATE webhook_inbox SET status = 'dead', attempts = 5, last_error = 'gave up', processed_at = now() WHERE event_id <> 'evt_ok'`,
		`UPDATE webhook_inbox SET status = 'processed', processed_at = now() WHERE event_id = 'evt_ok'`,
	} {
		_, err := e.schema.Pool.Exec(e.t.Context(), q)
		require.NoError(e.t, err)
	}
}

type listed struct {
	Events []inbox.Row `json:"events"`
	Count  int         `json:"count"`
}

func eventIDs(rows []inbox.Row) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.EventID)
	}
	return out
}

func TestDeadCommandsListShowAndReplay(t *testing.T) {
	e := newCLIEnv(t, nil)
	e.seed()

	var l listed
	e.runJSON(&l, "dead", "list")
	require.ElementsMatch(t, []string{"evt_1", "evt_2", "cb_1"}, eventIDs(l.Events))
	e.runJSON(&l, "dead", "list", "-provider", "stripe", "-type", "customer.subscription.updated", "-since", "1h")
	require.Equal(t, []string{"evt_2"}, eventIDs(l.Events))
	require.Equal(t, 5, l.Events[0].Attempts)
	require.Equal(t, "gave up", *l.Events[0].LastError)
	e.runJSON(&l, "dead", "list", "-account", "site_b", "-environment", "live", "-limit", "5")
	require.Equal(t, []string{"cb_1"}, eventIDs(l.Events))
	code, _, stderr := e.run("dead", "list", "-since", "yesterday")
	require.Equal(t, 2, code, stderr)
	require.Contains(t, stderr, "neither a duration")

	var shown struct {
		Event   inbox.Row         `json:"event"`
		History []json.RawMessage `json:"history"`
	}
	e.runJSON(&shown, "dead", "show", "stripe", "acct_a", "test", "evt_2", "-payload")
	require.Equal(t, inbox.StatusDead, shown.Event.Status)
	require.JSONEq(t, `{"id":"evt_2"}`, string(shown.Event.Payload))
	require.NotNil(t, shown.History)
	code, _, _ = e.run("dead", "show", "stripe", "acct_a", "test", "evt_nope")
	require.Equal(t, 1, code)

	// A live event is not replayed by "dead replay", and says why.
	code, _, stderr = e.run("dead", "replay", "stripe", "acct_a", "test", "evt_ok")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "event is not dead (status processed)")
	require.Equal(t, inbox.StatusProcessed, e.status("evt_ok"))
	code, _, stderr = e.run("dead", "replay", "stripe", "acct_a", "test", "evt_1", "-type", "x")
	require.Equal(t, 2, code, "a key and filters at once")
	require.Contains(t, stderr, "takes no filters")

	var replayed struct {
		Replayed int `json:"replayed"`
	}
	e.runJSON(&replayed, "dead", "replay", "stripe", "acct_a", "test", "evt_1")
	require.Equal(t, 1, replayed.Replayed)
	require.Equal(t, inbox.StatusPending, e.status("evt_1"))
	e.runJSON(&replayed, "dead", "replay", "-provider", "stripe", "-type", "customer.subscription.updated")
	require.Equal(t, 1, replayed.Replayed)
	require.Equal(t, inbox.StatusPending, e.status("evt_2"))

	// The older commands keep working on what is left.
	e.runJSON(&l, "events", "-status", "dead")
	require.Equal(t, []string{"cb_1"}, eventIDs(l.Events))
	e.runJSON(&replayed, "replay", "dead", "-since", "1h")
	require.Equal(t, 1, replayed.Replayed)
}

func TestReplayPartitionCommand(t *testing.T) {
	kc := kafkatest.New(t, 2)
	e := newCLIEnv(t, kc)
	e.seed()
	cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Brokers...), kgo.DefaultProduceTopic(kc.Topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	for _, id := range []string{"evt_ok", "evt_1", "evt_ok"} {
		b, err := json.Marshal(message.Message{Kind: message.KindEvent, Resource: message.Resource{Provider: "stripe", SourceAccount: "acct_a",
			Environment: "test", Type: "subscription", ID: "sub_1"}, EventID: id})
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(t.Context(), &kgo.Record{Partition: 1, Value: b}).FirstErr())
	}

	var rep struct {
		Read           int            `json:"read"`
		ReplayedEvents int            `json:"replayed_events"`
		StartOffset    int64          `json:"start_offset"`
		EndOffset      int64          `json:"end_offset"`
		Complete       bool           `json:"complete"`
		Skipped        map[string]int `json:"skipped"`
	}
	e.runJSON(&rep, "replay", "partition", "-partition", "1", "-from-offset", "1")
	require.Equal(t, 2, rep.Read)
	require.Equal(t, 2, rep.ReplayedEvents)
	require.EqualValues(t, 1, rep.StartOffset)
	require.EqualValues(t, 3, rep.EndOffset)
	require.True(t, rep.Complete)
	require.Equal(t, inbox.StatusPending, e.status("evt_ok"))
	require.Equal(t, inbox.StatusPending, e.status("evt_1"))

	e.runJSON(&rep, "replay", "partition", "-partition", "1", "-since", "1h", "-to-offset", "2")
	require.Equal(t, 2, rep.Read)
	require.Equal(t, map[string]int{}, rep.Skipped)

	for args, msg := range map[string]string{
		"-partition 2 -from-offset 0":              "partition 2 is out of range: topic " + kc.Topic + " has 2 partitions (0-1)",
		"-from-offset 0":                           "-partition is required",
		"-partition 0":                             "give a from-offset or a since time",
		"-partition 0 -from-offset 0 -since 1h":    "not both",
		"-partition 0 -from-offset 3 -to-offset 1": "must be greater than from-offset",
		"-partition 0 -since whenever":             "neither a duration",
	} {
		code, _, stderr := e.run(append([]string{"replay", "partition"}, strings.Fields(args)...)...)
		require.Equal(t, 2, code, args)
		require.Contains(t, stderr, msg, args)
	}
}
