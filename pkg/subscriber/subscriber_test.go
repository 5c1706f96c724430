package subscriber_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	swh "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookyard/hookyard/effects"
	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/pkg/subscriber"
)

func newSecret(t *testing.T) string {
	var b [32]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:])
}

// delivery is one request the subscriber's server saw.
type delivery struct {
	id      string
	subject string
	body    string
	code    int
}

// subscriberServer verifies every request with the official Standard
// Webhooks library and answers the first attempt of each change 503 and
// the second of every third change not at all (the sender times out: an
// ambiguous attempt). At each request it checks that no earlier change of
// the resource is unacknowledged and no later one acknowledged.
type subscriberServer struct {
	t  *testing.T
	wh *swh.Webhook
	mu sync.Mutex
	// per webhook-id: attempts seen
	attempts map[string]int
	// per resource: observation order key → acknowledged (2xx)
	acked map[string]map[int64]bool
	log   []delivery
}

func observation(c message.Change) int64 {
	// Stripe resources are fetched: their fetch sequence orders them.
	return *c.FetchSeq
}

func (s *subscriberServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if err := s.wh.Verify(body, r.Header); err != nil {
		s.t.Errorf("a delivery the official library does not verify: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	c, err := message.DecodeChange(body)
	if err != nil {
		s.t.Errorf("delivery is not a change: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	id := r.Header.Get(subscriber.IDHeader)
	res, obs := c.Resource.Key(), observation(c)
	s.mu.Lock()
	s.attempts[id]++
	n := s.attempts[id]
	if s.acked[res] == nil {
		s.acked[res] = map[int64]bool{}
	}
	for o, ok := range s.acked[res] {
		if o < obs && !ok {
			s.t.Errorf("%s: change %d delivered while the earlier %d is unacknowledged", res, obs, o)
		}
		if o > obs && ok {
			s.t.Errorf("%s: change %d delivered after the later %d", res, obs, o)
		}
	}
	if _, seen := s.acked[res][obs]; !seen {
		s.acked[res][obs] = false
	}
	hang := n == 2 && len(s.attempts)%3 == 0
	code := http.StatusOK
	if n == 1 {
		code = http.StatusServiceUnavailable
	}
	s.mu.Unlock()
	if hang {
		<-r.Context().Done()
		code = http.StatusServiceUnavailable
	}
	s.mu.Lock()
	if code == http.StatusOK {
		s.acked[res][obs] = true
	}
	s.log = append(s.log, delivery{id: id, subject: subscriber.Subject(c), body: string(body), code: code})
	s.mu.Unlock()
	w.WriteHeader(code)
}

func (s *subscriberServer) deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.log...)
}

// topicChanges reads the whole changes topic (call it once the pipeline is
// idle) and returns the first record of each observation, by subject.
func topicChanges(t *testing.T, p *pipelinetest.Pipeline) (map[string]message.Change, map[string]string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Kafka.Brokers...), kgo.ConsumeTopics(p.Kafka.ChangesTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, p.Kafka.ChangesTopic)
	require.NoError(t, err)
	var want, got int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	changes, raw := map[string]message.Change{}, map[string]string{}
	for got < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			got++
			c, err := message.DecodeChange(r.Value)
			require.NoError(t, err)
			if _, ok := changes[subscriber.Subject(c)]; !ok {
				changes[subscriber.Subject(c)], raw[subscriber.Subject(c)] = c, string(r.Value)
			}
		})
	}
	require.Equal(t, want, got)
	return changes, raw, want
}

// Changes go out to a subscriber as Standard Webhooks, through the effects
// machinery: every delivery verifies with the official library; each
// change is delivered, settled by a 2xx after failed (503) and timed-out
// attempts, every attempt with the same webhook-id (the action's stable
// key) and the record's bytes; per resource the delivered changes come in
// the topic's order, and a later change is not delivered while an earlier
// one is failing (two senders claim side by side, while the changes are
// produced); a subscriber whose accounts filter excludes them gets none;
// a re-read of the whole topic records nothing new.
func TestSubscribersReceiveChangesSignedInOrder(t *testing.T) {
	t.Parallel()
	p := pipelinetest.New(t, pipelinetest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	secret := newSecret(t)
	wh, err := swh.NewWebhook(secret)
	require.NoError(t, err)
	srvState := &subscriberServer{t: t, wh: wh, attempts: map[string]int{}, acked: map[string]map[int64]bool{}}
	srv := httptest.NewServer(srvState)
	t.Cleanup(srv.Close)
	subs := subscriber.Subscribers{
		{Name: "billing", URL: srv.URL, SecretEnv: "BILLING_SECRET", Secret: secret, Types: []string{"subscription"}},
		{Name: "elsewhere", URL: srv.URL, SecretEnv: "ELSEWHERE_SECRET", Secret: newSecret(t), Accounts: []string{"acct_other"}},
	}
	feedCfg := subscriber.FeederConfig{Brokers: p.Kafka.Brokers, Topic: p.Kafka.ChangesTopic, Group: "subscribers-" + p.Schema, Subscribers: subs}
	feeder, err := subscriber.NewFeeder(p.Pool, p.Log, feedCfg)
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("run: %v", err)
			}
		}()
	}
	run(feeder.Run)
	for i := range 2 {
		snd, err := effects.New(p.Pool, p.Log, effects.Config{Subscribers: subs[:1], Timeout: 300 * time.Millisecond,
			PollInterval: 10 * time.Millisecond, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
			SenderID: fmt.Sprintf("sender-%d", i)})
		require.NoError(t, err)
		run(snd.Run)
	}

	const subsN, rounds = 4, 4
	for r := range rounds {
		for i := range subsN {
			s := stripesim.Subscription{ID: fmt.Sprintf("sub_out_%d", i), Customer: fmt.Sprintf("cus_out_%d", i),
				Status: []string{"trialing", "active", "past_due", "canceled"}[r], CurrentPeriodEnd: time.Now().Add(720 * time.Hour).Unix()}
			p.Sim.Put(s)
			_, code, err := p.Sim.Send(ctx, "customer.subscription.updated", s)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, code)
		}
		p.WaitIdle()
	}
	changes, raw, records := topicChanges(t, p)
	require.GreaterOrEqual(t, len(changes), subsN*2, "changes on the topic")

	kind := subs[0].Kind()
	p.Eventually(func() bool {
		var sent, all int
		err := p.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'sent'), count(*) FROM action WHERE kind = $1`, kind).Scan(&sent, &all)
		return err == nil && all == len(changes) && sent == all
	}, "every change delivered")

	byID := map[string][]delivery{}
	for _, d := range srvState.deliveries() {
		byID[d.id] = append(byID[d.id], d)
	}
	require.Len(t, byID, len(changes), "one webhook-id per change")
	for subject, c := range changes {
		k := action.Key{Provider: c.Provider, SourceAccount: c.SourceAccount, Environment: c.Environment, SubjectID: subject, Kind: kind}
		ds := byID[k.String()]
		require.GreaterOrEqual(t, len(ds), 2, "%s: its first attempt failed, so it was retried with the same webhook-id", subject)
		acks := 0
		for _, d := range ds {
			require.Equal(t, subject, d.subject, "one webhook-id, one change")
			require.Equal(t, raw[subject], d.body, "every attempt carries the record's bytes")
			if d.code == http.StatusOK {
				acks++
			}
		}
		require.Equal(t, 1, acks, "%s: settled by one 2xx, not sent again after it", subject)
	}
	// Per resource, the acknowledged changes in delivery order are the
	// topic's order.
	last := map[string]int64{}
	for _, d := range srvState.deliveries() {
		if d.code != http.StatusOK {
			continue
		}
		c := changes[d.subject]
		require.Greater(t, observation(c), last[c.Resource.Key()], "%s delivered out of order", d.subject)
		last[c.Resource.Key()] = observation(c)
	}
	var elsewhere int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*) FROM action WHERE kind = $1`, subs[1].Kind()).Scan(&elsewhere))
	require.Zero(t, elsewhere, "a subscriber takes only its accounts' changes")

	// A re-read of the whole topic (another group, from the start) records
	// nothing new: every record names an action that is there.
	feedCfg.Group = "subscribers-reread-" + p.Schema
	again, err := subscriber.NewFeeder(p.Pool, p.Log, feedCfg)
	require.NoError(t, err)
	run(again.Run)
	p.Eventually(func() bool { return again.Read() >= records }, "the topic re-read")
	var all, open int
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status <> 'sent') FROM action WHERE kind = $1`, kind).Scan(&all, &open))
	require.Equal(t, len(changes), all)
	require.Zero(t, open)
}
