// Package pipelinetest runs the whole pipeline inside a test: its own Postgres
// schema, its own Kafka topic and consumer group (on an in-process kfake, or
// on the real cluster of KAFKA_BROKERS: see pkg/kafkatest), the Stripe
// simulator, the receiver on a real HTTP listener, the outbox relay and one
// or more processors.
package pipelinetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/internal/testkit/kafkatest"
	outboxrelay "github.com/hookyard/hookyard/outbox-relay"
	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/pkg/topic"
	"github.com/hookyard/hookyard/processor"
	"github.com/hookyard/hookyard/receiver"
)

// Test identities.
const (
	StripeSecret   = "whsec_pipeline_test"
	StripeAccount  = "acct_test"
	StripeEndpoint = "stripe-test"
	OpsToken       = "ops-test-token"
)

// Options shape a pipeline.
type Options struct {
	// Partitions of the topic. Defaults to 4.
	Partitions int32
	// Endpoints in addition to the Stripe one.
	Endpoints []provider.Endpoint
	// StripeProject is the Stripe endpoint's `project`. Defaults to none:
	// the provider's default (subscriptions).
	StripeProject []string
	// NoProcessor leaves starting processors to the test.
	NoProcessor bool
	// Processor adjusts each processor's config.
	Processor func(*processor.Config)
	// DatabaseURL uses another Postgres than the local test database.
	DatabaseURL string
	// Relays side by side. Defaults to 1.
	Relays int
	// Relay adjusts each relay's config.
	Relay func(*outboxrelay.Config)
	// Brokers uses this Kafka (topic kafkatest.Topic, made if missing) instead
	// of kafkatest's choice (kfake, or a topic of the test's own on the cluster
	// of KAFKA_BROKERS).
	Brokers []string
}

// Pipeline is a running pipeline.
type Pipeline struct {
	T         testing.TB
	Pool      *pgxpool.Pool
	Schema    string
	Kafka     *kafkatest.Cluster
	Sim       *stripesim.Sim
	SimServer *httptest.Server
	Stripe    *stripe.Client
	Receiver  *httptest.Server
	Ops       *httptest.Server
	Endpoints []provider.Endpoint
	Log       *slog.Logger
	opts      Options
	ctx       context.Context
	wg        sync.WaitGroup
}

// Logger returns a logger that writes to the test log when -v, else discards.
func Logger(t testing.TB) *slog.Logger {
	if testing.Verbose() || os.Getenv("HOOKYARD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// New starts a pipeline that stops when the test ends.
func New(t testing.TB, opts Options) *Pipeline {
	t.Helper()
	if opts.Partitions == 0 {
		opts.Partitions = 4
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pipeline{T: t, opts: opts, ctx: ctx, Log: Logger(t)}
	var schema *dbtest.Schema
	if opts.DatabaseURL != "" {
		schema = dbtest.NewAt(t, opts.DatabaseURL, 16)
	} else {
		schema = dbtest.NewWithConns(t, 16)
	}
	p.Pool, p.Schema = schema.Pool, schema.Name
	if len(opts.Brokers) > 0 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(opts.Brokers...))
		require.NoError(t, err)
		_, err = topic.Ensure(ctx, cl, kafkatest.Topic, opts.Partitions, 1)
		if err == nil {
			_, err = topic.EnsureCompacted(ctx, cl, kafkatest.ChangesTopic, opts.Partitions, 1)
		}
		cl.Close()
		require.NoError(t, err)
		p.Kafka = &kafkatest.Cluster{Brokers: opts.Brokers, Topic: kafkatest.Topic, ChangesTopic: kafkatest.ChangesTopic, Group: "test-processors"}
	} else {
		p.Kafka = kafkatest.New(t, opts.Partitions)
	}
	p.Endpoints = append([]provider.Endpoint{{ID: StripeEndpoint, Provider: provider.Stripe, SourceAccount: StripeAccount,
		Environment: "test", Secrets: []string{StripeSecret}, Project: opts.StripeProject}}, opts.Endpoints...)

	rcv, err := receiver.New(p.Pool, p.Log, receiver.Config{Endpoints: p.Endpoints})
	require.NoError(t, err)
	p.Receiver = httptest.NewServer(rcv.Handler())
	p.Sim = stripesim.New(stripesim.Config{WebhookURL: p.Receiver.URL + "/webhooks/" + StripeEndpoint, WebhookSecret: StripeSecret})
	p.SimServer = httptest.NewServer(p.Sim)
	p.Stripe = stripe.NewClient(stripe.APIConfig{BaseURL: p.SimServer.URL, APIKey: stripesim.DevAPIKey, RatePerSecond: 10000, Burst: 10000,
		BreakerOpenFor: 500 * time.Millisecond, Timeout: 2 * time.Second}, p.Log)
	p.Ops = httptest.NewServer(api.New(p.Pool, p.Log, api.Config{Token: OpsToken}))

	for range max(opts.Relays, 1) {
		p.StartRelay(opts.Relay)
	}
	if !opts.NoProcessor {
		p.StartProcessor("p1", nil)
	}
	t.Cleanup(func() {
		cancel()
		p.wg.Wait()
		p.Receiver.Close()
		rcv.Stop()
		p.SimServer.Close()
		p.Ops.Close()
	})
	return p
}

// StartRelay starts one more outbox relay, with adjust applied to its
// config; it stops when the test ends.
func (p *Pipeline) StartRelay(adjust func(*outboxrelay.Config)) {
	p.T.Helper()
	cfg := outboxrelay.Config{Brokers: p.Kafka.Brokers, Topic: p.Kafka.Topic, ChangesTopic: p.Kafka.ChangesTopic,
		PollInterval: 100 * time.Millisecond}
	if adjust != nil {
		adjust(&cfg)
	}
	relay, err := outboxrelay.New(p.Pool, p.Log, cfg)
	require.NoError(p.T, err)
	p.goRun(func(ctx context.Context) error { return relay.Run(ctx) })
}

func (p *Pipeline) goRun(run func(context.Context) error) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := run(p.ctx); err != nil && p.ctx.Err() == nil {
			p.T.Errorf("pipeline service: %v", err)
		}
	}()
}

// ProcessorConfig is the config StartProcessor uses before adjust.
func (p *Pipeline) ProcessorConfig(id string) processor.Config {
	cfg := processor.Config{Brokers: p.Kafka.Brokers, Topic: p.Kafka.Topic, ChangesTopic: p.Kafka.ChangesTopic,
		Group: p.Kafka.Group, InstanceID: id,
		Endpoints: p.Endpoints, Fetchers: map[string]provider.Fetcher{provider.Stripe: stripe.Fetcher{Client: p.Stripe}},
		BackoffBase: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond, RetryInterval: 50 * time.Millisecond,
		RevokeGrace: 2 * time.Second}
	if p.opts.Processor != nil {
		p.opts.Processor(&cfg)
	}
	return cfg
}

// StartProcessor starts a processor; stop cancels it (the member leaves the
// group). It returns once the processor polls.
func (p *Pipeline) StartProcessor(id string, adjust func(*processor.Config)) (proc *processor.Processor, stop func()) {
	return p.StartProcessorOn(p.Pool, id, adjust)
}

// StartProcessorOn is StartProcessor with its own pool.
func (p *Pipeline) StartProcessorOn(pool *pgxpool.Pool, id string, adjust func(*processor.Config)) (proc *processor.Processor, stop func()) {
	cfg := p.ProcessorConfig(id)
	if adjust != nil {
		adjust(&cfg)
	}
	proc, err := processor.New(pool, p.Log, cfg)
	require.NoError(p.T, err)
	ctx, cancel := context.WithCancel(p.ctx)
	done := make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(done)
		if err := proc.Run(ctx); err != nil && ctx.Err() == nil {
			p.T.Errorf("processor %s: %v", id, err)
		}
	}()
	select {
	case <-proc.Ready():
	case <-done:
	case <-time.After(30 * time.Second):
		p.T.Fatalf("processor %s did not start", id)
	}
	return proc, func() { cancel(); <-done }
}

// Resource names a Stripe subscription of the test account.
func Resource(id string) message.Resource {
	return message.Resource{Provider: provider.Stripe, SourceAccount: StripeAccount, Environment: "test", Type: "subscription", ID: id}
}

// Projection reads a projection (ok false when there is none).
func (p *Pipeline) Projection(r message.Resource) (projection.Projection, bool) {
	pr, err := projection.Get(context.Background(), p.Pool, r)
	if err == projection.ErrNotFound {
		return pr, false
	}
	require.NoError(p.T, err)
	return pr, true
}

// Eventually waits up to 30s for cond.
func (p *Pipeline) Eventually(cond func() bool, msg string, args ...any) {
	p.T.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.T.Fatalf("timed out waiting: "+msg, args...)
}

// WaitIdle waits until every inbox row is finished (not pending) and the
// outbox is empty.
func (p *Pipeline) WaitIdle() {
	p.T.Helper()
	p.Eventually(func() bool {
		var n int
		err := p.Pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM webhook_inbox WHERE status = 'pending') + (SELECT count(*) FROM outbox)`).Scan(&n)
		return err == nil && n == 0
	}, "pipeline idle")
}

// Access asks the ops API for a subscription's access decision over HTTP.
func (p *Pipeline) Access(subID string) (access.Decision, int) {
	p.T.Helper()
	req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/access/stripe/%s/test/%s", p.Ops.URL, StripeAccount, subID), nil)
	req.Header.Set("Authorization", "Bearer "+OpsToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.T, err)
	defer resp.Body.Close()
	var d access.Decision
	require.NoError(p.T, json.NewDecoder(resp.Body).Decode(&d))
	return d, resp.StatusCode
}

// PostSigned posts body to an endpoint with headers and returns the status
// and response body.
func (p *Pipeline) PostSigned(endpointID string, body []byte, headers http.Header) (int, string) {
	p.T.Helper()
	req, _ := http.NewRequest(http.MethodPost, p.Receiver.URL+"/webhooks/"+endpointID, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(p.T, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Records reads every record of the topic (for tests that inspect keys).
func (p *Pipeline) Records(n int) []*kgo.Record {
	p.T.Helper()
	return p.TopicRecords(p.Kafka.Topic, n)
}

// TopicRecords reads the first n records of topic, from its start, waiting
// up to 20s for them; it returns what it read by then.
func (p *Pipeline) TopicRecords(topic string, n int) []*kgo.Record {
	p.T.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(p.T, err)
	defer cl.Close()
	var out []*kgo.Record
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for len(out) < n && ctx.Err() == nil {
		out = append(out, cl.PollFetches(ctx).Records()...)
	}
	return out
}

// PostStandard posts a Standard Webhooks message ({type, timestamp, data})
// to endpoint, signed with secret as a sender signs it, and requires a 200.
func (p *Pipeline) PostStandard(endpoint, secret, msgID string, at time.Time, data map[string]any, eventType string) {
	p.T.Helper()
	body, err := json.Marshal(map[string]any{"type": eventType, "timestamp": at.UTC().Format(time.RFC3339Nano), "data": data})
	require.NoError(p.T, err)
	h, err := standardwebhooks.Sign(secret, msgID, time.Now(), body)
	require.NoError(p.T, err)
	code, resp := p.PostSigned(endpoint, body, h)
	require.Equal(p.T, http.StatusOK, code, resp)
}

// WaitEvent waits until the inbox row of eventID has status.
func (p *Pipeline) WaitEvent(eventID, status string) {
	p.T.Helper()
	p.Eventually(func() bool {
		var s string
		err := p.Pool.QueryRow(context.Background(), `SELECT status FROM webhook_inbox WHERE event_id = $1`, eventID).Scan(&s)
		return err == nil && s == status
	}, "event %s %s", eventID, status)
}
