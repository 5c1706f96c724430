package standardwebhooks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/processor"
)

const (
	senderSecret = "whsec_c2VuZGVyLXBpcGVsaW5lLXRlc3Qta2V5LTAxMjM0NTY3"
	senderAcct   = "sender-acct"
	senderEP     = "sender-fetch"
)

// sender is a Standard Webhooks sender's API: it serves each contact's
// current state at /v1/contacts/{id}, and answers inconveniently first:
// a 503, then a 429 whose Retry-After is an HTTP-date. An unknown id is
// a 404.
type sender struct {
	mu    sync.Mutex
	state map[string]string
	calls map[string]int
}

func (s *sender) set(id, doc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state[id] = doc
}

func (s *sender) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer sender-token" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	id := strings.TrimPrefix(r.URL.Path, "/v1/contacts/")
	s.mu.Lock()
	s.calls[id]++
	n, doc, ok := s.calls[id], s.state[id], s.state[id] != ""
	s.mu.Unlock()
	switch {
	case !ok:
		http.NotFound(w, r)
	case n == 1:
		w.WriteHeader(http.StatusServiceUnavailable)
	case n == 2:
		w.Header().Set("Retry-After", time.Now().Add(2*time.Second).UTC().Format(http.TimeFormat))
		w.WriteHeader(http.StatusTooManyRequests)
	default:
		_, _ = w.Write([]byte(doc))
	}
}

// Hints of an unversioned sender with a fetch API, delivered reversed,
// twice each and concurrently while the sender's state moves, end at the
// sender's final state through a 503 and a 429 (Retry-After as a date);
// a resource the sender deletes is a tombstone only because its answer
// says deleted; a 404 is fetch_not_found and never a projection, let
// alone a deleted one. Fails if unversioned events are not fetched, if a
// 404 became a deletion, or if the deleted field were ignored.
func TestUnversionedSenderHintsAreFetchedToTheFinalState(t *testing.T) {
	s := &sender{state: map[string]string{}, calls: map[string]int{}}
	srv := httptest.NewServer(s)
	defer srv.Close()
	t.Setenv("SENDER_PIPELINE_TOKEN", "sender-token")
	ep := provider.Endpoint{ID: senderEP, Provider: provider.StandardWebhooks, SourceAccount: senderAcct, Environment: "test",
		Secrets: []string{senderSecret},
		Paths:   provider.Paths{EventType: "type", ResourceID: "data.id", ResourceTypeValue: "contact"},
		Fetch:   &provider.FetchAPI{URL: srv.URL + "/v1/{type}s/{id}", TokenEnv: "SENDER_PIPELINE_TOKEN"}}
	conn, err := standardwebhooks.Provider{}.Connect([]provider.Endpoint{ep}, provider.APIOptions{})
	require.NoError(t, err)
	p := pipelinetest.New(t, pipelinetest.Options{Endpoints: []provider.Endpoint{ep}, Processor: func(c *processor.Config) {
		c.Fetchers[provider.StandardWebhooks] = conn.Fetcher()
	}})

	post := func(ids ...string) {
		var wg sync.WaitGroup
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				msg := strings.Split(id, "/")
				p.PostStandard(senderEP, senderSecret, msg[1], time.Now(), map[string]any{"id": msg[0]}, "contact.updated")
			}()
		}
		wg.Wait()
	}
	// The sender's state moves; each step's event is delivered with the
	// earlier ones again, newest first.
	for i, status := range []string{"new", "active", "inactive"} {
		s.set("c_1", fmt.Sprintf(`{"id":"c_1","status":%q,"step":%d}`, status, i))
		var ids []string
		for j := i; j >= 0; j-- {
			ids = append(ids, fmt.Sprintf("c_1/msg_c1_%d", j), fmt.Sprintf("c_1/msg_c1_%d", j))
		}
		post(ids...)
	}
	s.set("c_2", `{"id":"c_2","status":"active"}`)
	post("c_2/msg_c2_0", "c_2/msg_c2_0")
	s.set("c_2", `{"id":"c_2","status":"archived","deleted":true}`)
	post("c_2/msg_c2_1", "c_2/msg_c2_1", "c_missing/msg_missing_0", "c_missing/msg_missing_0")

	res := func(id string) message.Resource {
		return message.Resource{Provider: provider.StandardWebhooks, SourceAccount: senderAcct, Environment: "test", Type: "contact", ID: id}
	}
	p.Eventually(func() bool {
		pr, ok := p.Projection(res("c_1"))
		return ok && pr.Status == "inactive"
	}, "c_1 at the sender's final state")
	p.Eventually(func() bool {
		pr, ok := p.Projection(res("c_2"))
		return ok && pr.Deleted
	}, "c_2 a tombstone")
	p.Eventually(func() bool {
		var n int
		err := p.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM projection_history WHERE event_id = 'msg_missing_0' AND outcome = 'fetch_not_found'`).Scan(&n)
		return err == nil && n > 0
	}, "the 404 recorded as fetch_not_found")
	// Every event of c_1 was applied or found stale, so nothing moves it
	// again: wait for them, then read it once more.
	for j := range 3 {
		p.WaitEvent(fmt.Sprintf("msg_c1_%d", j), "processed")
	}
	pr, ok := p.Projection(res("c_1"))
	require.True(t, ok)
	require.Equal(t, "inactive", pr.Status)
	require.False(t, pr.Deleted)
	pr, ok = p.Projection(res("c_2"))
	require.True(t, ok)
	require.Equal(t, "archived", pr.Status)
	_, ok = p.Projection(res("c_missing"))
	require.False(t, ok, "a 404 never becomes a state, deleted or not")
}
