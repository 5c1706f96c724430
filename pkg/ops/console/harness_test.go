package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	stdslog "log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/health"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/console"
	"github.com/hookyard/hookyard/pkg/ops/job"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/processor"
)

// The story the console is tested on, told through the real pipeline
// (receiver → inbox/outbox → relay → in-process Kafka → processor): one
// sender with a versioned endpoint and a hint endpoint whose provider
// fetches always fail.
const (
	account    = "sender"
	env        = "test"
	epSnap     = "sw-snap"
	epHint     = "sw-hint"
	subID      = "sub_story"
	typeSnap   = "subscription.updated"
	typeHint   = "subscription.touched"
	opsToken   = "console-ops-token"
	readToken  = "console-read-token"
	deadEvents = 3
)

var secret = "whsec_" + base64.StdEncoding.EncodeToString([]byte("console-test-key-0123456789abcde"))

// failing answers every fetch as a provider that is down would.
type failing struct{}

func (failing) Fetch(context.Context, message.Resource) (provider.Fetched, error) {
	return provider.Fetched{}, errors.New("provider answered 503")
}

// slowStep is a job kind that never ends by itself: each step is a short
// bounded piece of work, so only a cancel stops it.
func slowStep(ctx context.Context, _, _ json.RawMessage) (json.RawMessage, map[string]int64, bool, error) {
	select {
	case <-time.After(100 * time.Millisecond):
	case <-ctx.Done():
		return nil, nil, false, ctx.Err()
	}
	return nil, map[string]int64{"steps_done": 1}, false, nil
}

type bundle struct {
	p    *pipelinetest.Pipeline
	url  string
	jobs *job.Runner
}

// newBundle runs the pipeline, posts the story (a versioned snapshot v2,
// then v1 late: stale; three hints that go dead) and serves the ops API
// with the console mounted, logins taking opsToken (every scope) and
// readToken (read only).
func newBundle(t *testing.T) *bundle {
	t.Helper()
	paths := provider.Paths{ResourceID: "data.id", State: "data"}
	snap := paths
	snap.Version = "data.version"
	p := pipelinetest.New(t, pipelinetest.Options{
		Endpoints: []provider.Endpoint{
			{ID: epSnap, Provider: provider.StandardWebhooks, SourceAccount: account, Environment: env, Secrets: []string{secret}, Paths: snap},
			{ID: epHint, Provider: provider.StandardWebhooks, SourceAccount: account, Environment: env, Secrets: []string{secret}, Paths: paths,
				// A fetch API makes its unversioned events hints; the fetcher is the test's.
				Fetch: &provider.FetchAPI{URL: "http://127.0.0.1:1/{id}"}},
		},
		Processor: func(c *processor.Config) {
			c.Fetchers = map[string]provider.Fetcher{provider.StandardWebhooks: failing{}}
			c.MaxAttempts = 1 // a failed fetch goes dead at once
		},
	})
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	p.PostStandard(epSnap, secret, "msg_v2", t0.Add(2*time.Minute), map[string]any{"id": subID, "version": 2, "status": "active"}, typeSnap)
	p.WaitEvent("msg_v2", "processed")
	p.PostStandard(epSnap, secret, "msg_v1", t0.Add(time.Minute), map[string]any{"id": subID, "version": 1, "status": "trialing"}, typeSnap)
	p.WaitEvent("msg_v1", "processed")
	for i, id := range []string{"msg_d1", "msg_d2", "msg_d3"} {
		p.PostStandard(epHint, secret, id, t0.Add(time.Duration(3+i)*time.Minute), map[string]any{"id": "sub_hint"}, typeHint)
		p.WaitEvent(id, "dead")
	}

	steps := map[string]job.Step{"slow": slowStep, job.KindReplayDead: job.ReplayDeadStep(p.Pool)}
	jobs := job.New(p.Pool, p.Log, job.Config{Steps: steps})
	e := health.NewEcho()
	auth := console.AuthenticatorFunc(func(tok string) (console.Principal, bool) {
		switch tok {
		case opsToken:
			return console.Principal{Name: "ops", Scopes: console.AllScopes}, true
		case readToken:
			return console.Principal{Name: "viewer", Scopes: console.Scopes{console.ScopeRead}}, true
		}
		return console.Principal{}, false
	})
	c, err := console.Mount(e, p.Pool, p.Log, console.Config{Auth: auth, Jobs: jobs,
		Scopes:  []console.Scope{{Provider: provider.StandardWebhooks, SourceAccount: account, Environment: env}},
		Brokers: p.Kafka.Brokers, Topic: p.Kafka.Topic, Group: p.Kafka.Group})
	require.NoError(t, err)
	srv := httptest.NewServer(e)
	t.Cleanup(func() {
		srv.Close()
		c.Close()
		jobs.Wait()
	})
	return &bundle{p: p, url: srv.URL, jobs: jobs}
}

func slog(t testing.TB) *stdslog.Logger { return pipelinetest.Logger(t) }
