package processor_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
)

// An event whose data the database rejects (here a snapshot jsonb cannot
// hold) is marked dead with the reason, and the rest of its batch — and its
// partition — goes on. Without the isolation the batch retries forever.
func TestPoisonedEventDoesNotBlockItsPartition(t *testing.T) {
	t.Parallel()
	cb := provider.Endpoint{ID: "cb-poison", Provider: provider.Chargebee, SourceAccount: "site", Environment: "test", Secrets: []string{"u:p"}}
	p := pipelinetest.New(t, pipelinetest.Options{Partitions: 1, NoProcessor: true, Endpoints: []provider.Endpoint{cb}})
	ctx := context.Background()
	post := func(id, sub string, version int, status string) {
		body := fmt.Sprintf(`{"id":%q,"event_type":"subscription_changed","content":{"subscription":{"id":%q,"status":"%s","resource_version":%d}}}`,
			id, sub, status, version)
		h := http.Header{}
		h.Set("Authorization", chargebee.BasicAuth("u", "p"))
		code, resp := p.PostSigned(cb.ID, []byte(body), h)
		require.Equal(t, http.StatusOK, code, resp)
	}
	post("ev_poison", "sub_p", 1, `bad\u0000status`)
	post("ev_good", "sub_g", 1, "active")
	post("ev_after", "sub_p", 2, "active")
	p.Eventually(func() bool {
		var n int
		return p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&n) == nil && n == 0
	}, "relay published every event")

	_, _ = p.StartProcessor("poison", nil)
	p.WaitIdle()

	var status, lastErr string
	require.NoError(t, p.Pool.QueryRow(ctx, `SELECT status, coalesce(last_error, '') FROM webhook_inbox WHERE event_id = 'ev_poison'`).Scan(&status, &lastErr))
	require.Equal(t, "dead", status)
	require.Contains(t, lastErr, "rejected by the database")
	for _, sub := range []string{"sub_g", "sub_p"} {
		pr, ok := p.Projection(message.Resource{Provider: provider.Chargebee, SourceAccount: "site", Environment: "test", Type: "subscription", ID: sub})
		require.True(t, ok, sub)
		require.Equal(t, "active", pr.Status, sub)
	}
}
