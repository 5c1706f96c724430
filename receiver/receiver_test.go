package receiver_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/promread"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/receiver"
)

func TestEachProviderWithRealSignatureIsStoredUnderEndpointIdentity(t *testing.T) {
	t.Parallel()

	cases := []struct {
		name               string
		delivery           func(t *testing.T) delivery
		prov, account, env string
		eventID, eventType string
		messageKey         string
	}{
		{
			name: "stripe",
			delivery: func(t *testing.T) delivery {
				return stripeDelivery("stripe-test", stripeBody("evt_1", "customer.subscription.updated", "sub_1", nil))
			},
			prov: provider.Stripe, account: "acct_owner", env: "test", eventID: "evt_1", eventType: "customer.subscription.updated",
			messageKey: "stripe/acct_owner/test/subscription/sub_1",
		},
		{
			name: "chargebee",
			delivery: func(t *testing.T) delivery {
				body := []byte(`{"id":"ev_cb_1","event_type":"subscription_changed","occurred_at":1700000000,
"content":{"subscription":{"id":"sub_cb_1","status":"active","resource_version":1700000000123}}}`)
				h := http.Header{}
				h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth(chargebeeUser, chargebeePass))
				return delivery{endpoint: "chargebee-test", header: h, body: body}
			},
			prov: provider.Chargebee, account: "site_owner", env: "test", eventID: "ev_cb_1", eventType: "subscription_changed",
			messageKey: "chargebee/site_owner/test/subscription/sub_cb_1",
		},
		{
			name: "github",
			delivery: func(t *testing.T) delivery {
				body := []byte(`{"action":"opened","repository":{"id":1296269,"full_name":"octo/widgets"},"organization":{"id":9919,"login":"octo"}}`)
				h := http.Header{}
				h.Set(github.SignatureHeader, github.Sign(body, githubSecret))
				h.Set(github.DeliveryHeader, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
				h.Set(github.EventHeader, "issues")
				return delivery{endpoint: "github-prod", header: h, body: body}
			},
			prov: provider.GitHub, account: "org_owner", env: "prod", eventID: "72d3162e-cc78-11e3-81ab-4c9367dc0958", eventType: "issues.opened",
			messageKey: "github/org_owner/prod/repository/1296269", // the repository's id, which a rename keeps
		},
		{
			name: "standard-webhooks",
			delivery: func(t *testing.T) delivery {
				body := []byte(`{"type":"subscription.updated","data":{"id":"sub_sw_1","version":42,"status":"active"}}`)
				h, err := standardwebhooks.Sign(standardSecret, "msg_sw_1", time.Now(), body)
				require.NoError(t, err)
				return delivery{endpoint: "standard-test", header: h, body: body}
			},
			prov: provider.StandardWebhooks, account: "sender_owner", env: "test", eventID: "msg_sw_1", eventType: "subscription.updated",
			messageKey: "standard-webhooks/sender_owner/test/subscription/sub_sw_1",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, receiver.Config{})
			res := b.post(t, tc.delivery(t))
			require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
			require.Equal(t, "accepted", res.answer.Status)
			require.Equal(t, tc.eventID, res.answer.EventID)
			requireStoredOnce(t, b.pool, tc.prov, tc.account, tc.env, tc.eventID, tc.messageKey)
			require.Equal(t, tc.eventType, inboxRows(t, b.pool)[0].EventType)
		})
	}
}

func TestRefusalsStoreNothingAndCarryMachineReadableCode(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{BodyLimit: 1024})

	sub := func(id string, extra map[string]any) []byte {
		return stripeBody(id, "customer.subscription.updated", "sub_1", extra)
	}
	big := sub("evt_big", map[string]any{"padding": strings.Repeat("x", 4096)})

	cases := []struct {
		name     string
		delivery delivery
		status   int
		code     string
	}{
		{"unknown endpoint", stripeDelivery("no-such-endpoint", sub("evt_a", nil)), http.StatusNotFound, receiver.CodeUnknownEndpoint},
		{"text/plain content type", func() delivery {
			d := stripeDelivery("stripe-test", sub("evt_b", nil))
			d.contentType = "text/plain"
			return d
		}(), http.StatusUnsupportedMediaType, receiver.CodeUnsupportedMedia},
		{"body over limit with Content-Length", stripeDelivery("stripe-test", big), http.StatusRequestEntityTooLarge, receiver.CodeTooLarge},
		{"body over limit chunked", func() delivery {
			d := stripeDelivery("stripe-test", big)
			d.chunked = true
			return d
		}(), http.StatusRequestEntityTooLarge, receiver.CodeTooLarge},
		{"signed with another secret", delivery{endpoint: "stripe-test", body: sub("evt_c", nil),
			header: stripeHeader(sub("evt_c", nil), "whsec_attacker", time.Now())}, http.StatusUnauthorized, receiver.CodeInvalidSignature},
		{"signature over other bytes", delivery{endpoint: "stripe-test", body: sub("evt_d", map[string]any{"livemode": false, "x": 1}),
			header: stripeHeader(sub("evt_d", nil), stripeSecret, time.Now())}, http.StatusUnauthorized, receiver.CodeInvalidSignature},
		{"missing signature", delivery{endpoint: "stripe-test", body: sub("evt_e", nil)}, http.StatusUnauthorized, receiver.CodeInvalidSignature},
		{"stale stripe timestamp", delivery{endpoint: "stripe-test", body: sub("evt_f", nil),
			header: stripeHeader(sub("evt_f", nil), stripeSecret, time.Now().Add(-10*time.Minute))}, http.StatusBadRequest, receiver.CodeStaleSignature},
		{"livemode event on test endpoint", stripeDelivery("stripe-test", sub("evt_g", map[string]any{"livemode": true})),
			http.StatusForbidden, receiver.CodeScope},
		{"connect event of another account", stripeDelivery("stripe-test", sub("evt_h", map[string]any{"account": "acct_victim"})),
			http.StatusForbidden, receiver.CodeScope},
		{"chunked chargebee with wrong password", delivery{endpoint: "chargebee-test", chunked: true,
			body:   []byte(`{"id":"ev_x","event_type":"subscription_changed","content":{}}`),
			header: http.Header{chargebee.AuthorizationHeader: {chargebee.BasicAuth(chargebeeUser, "guess")}}},
			http.StatusUnauthorized, receiver.CodeInvalidSignature},
		{"github signature over other bytes", delivery{endpoint: "github-prod", body: []byte(`{"action":"opened"}`),
			header: http.Header{github.SignatureHeader: {github.Sign([]byte(`{"action":"closed"}`), githubSecret)},
				github.DeliveryHeader: {"d-1"}, github.EventHeader: {"issues"}}},
			http.StatusUnauthorized, receiver.CodeInvalidSignature},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := b.post(t, tc.delivery)
			require.Equal(t, tc.status, res.code, "%s", res.raw)
			require.Equal(t, tc.code, res.answer.Error.Code, "%s", res.raw)
			require.NotEmpty(t, res.answer.Error.Message)
			require.Empty(t, res.answer.Status)
			requireNothingStored(t, b.pool)
		})
	}
}

func TestTenantComesFromEndpointNeverFromBody(t *testing.T) {
	t.Parallel()

	t.Run("chargebee body naming another site and environment", func(t *testing.T) {
		t.Parallel()
		b := setup(t, receiver.Config{})
		body := []byte(`{"id":"ev_spoof","event_type":"subscription_changed","source_account":"victim","environment":"live",
"site":"victim","provider":"stripe","content":{"subscription":{"id":"sub_v","site":"victim","resource_version":5}}}`)
		h := http.Header{chargebee.AuthorizationHeader: {chargebee.BasicAuth(chargebeeUser, chargebeePass)}}
		res := b.post(t, delivery{endpoint: "chargebee-test", header: h, body: body})
		require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
		requireStoredOnce(t, b.pool, provider.Chargebee, "site_owner", "test", "ev_spoof", "chargebee/site_owner/test/subscription/sub_v")
	})

	t.Run("standard webhooks body naming another account and environment", func(t *testing.T) {
		t.Parallel()
		b := setup(t, receiver.Config{})
		body := []byte(`{"type":"subscription.updated","source_account":"victim","environment":"live","provider":"stripe",
"data":{"id":"sub_v","version":7,"source_account":"victim","environment":"live"}}`)
		h, err := standardwebhooks.Sign(standardSecret, "msg_spoof", time.Now(), body)
		require.NoError(t, err)
		res := b.post(t, delivery{endpoint: "standard-test", header: h, body: body})
		require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
		requireStoredOnce(t, b.pool, provider.StandardWebhooks, "sender_owner", "test", "msg_spoof",
			"standard-webhooks/sender_owner/test/subscription/sub_v")
	})

	t.Run("stripe body naming another connect account is refused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, receiver.Config{})
		res := b.post(t, stripeDelivery("stripe-test", stripeBody("evt_v", "customer.subscription.deleted", "sub_v",
			map[string]any{"account": "acct_victim"})))
		require.Equal(t, http.StatusForbidden, res.code, "%s", res.raw)
		require.Equal(t, receiver.CodeScope, res.answer.Error.Code)
		requireNothingStored(t, b.pool)

		// Naming its own account is fine.
		res = b.post(t, stripeDelivery("stripe-test", stripeBody("evt_own", "customer.subscription.deleted", "sub_v",
			map[string]any{"account": "acct_owner"})))
		require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
		requireStoredOnce(t, b.pool, provider.Stripe, "acct_owner", "test", "evt_own", "stripe/acct_owner/test/subscription/sub_v")
	})

	t.Run("same event id on two accounts is two events", func(t *testing.T) {
		t.Parallel()
		b := setup(t, receiver.Config{})
		body := stripeBody("evt_shared", "customer.subscription.updated", "sub_1", nil)
		for _, ep := range []string{"stripe-test", "stripe-other"} {
			res := b.post(t, stripeDelivery(ep, body))
			require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
			require.Equal(t, "accepted", res.answer.Status, "endpoint %s", ep)
		}
		rows := inboxRows(t, b.pool)
		require.Len(t, rows, 2)
		accounts := []string{rows[0].SourceAccount, rows[1].SourceAccount}
		require.ElementsMatch(t, []string{"acct_owner", "acct_other"}, accounts)
		keys := []string{}
		for _, o := range outboxRows(t, b.pool) {
			keys = append(keys, o.Key)
		}
		require.ElementsMatch(t, []string{"stripe/acct_owner/test/subscription/sub_1", "stripe/acct_other/test/subscription/sub_1"}, keys)
	})
}

func TestEventTypeOutsideAllowListIsIgnoredWithoutWork(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{})

	res := b.post(t, stripeDelivery("stripe-allow", stripeBody("evt_inv", "invoice.paid", "sub_1", nil)))
	require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
	require.Equal(t, "ignored", res.answer.Status)
	rows := inboxRows(t, b.pool)
	require.Len(t, rows, 1)
	require.Equal(t, "ignored", rows[0].Status)
	require.Equal(t, "evt_inv", rows[0].EventID)
	require.Empty(t, outboxRows(t, b.pool))

	// A repeat of the ignored event stays ignored and creates no work either.
	res = b.post(t, stripeDelivery("stripe-allow", stripeBody("evt_inv", "invoice.paid", "sub_1", nil)))
	require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
	require.Equal(t, "duplicate", res.answer.Status)
	require.Len(t, inboxRows(t, b.pool), 1)
	require.Empty(t, outboxRows(t, b.pool))

	// An allowed type on the same endpoint is work.
	res = b.post(t, stripeDelivery("stripe-allow", stripeBody("evt_sub", "customer.subscription.updated", "sub_1", nil)))
	require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
	require.Equal(t, "accepted", res.answer.Status)
	require.Len(t, outboxRows(t, b.pool), 1)
}

func TestRepeatedEventIsAcknowledgedWithoutNewWork(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{})
	body := stripeBody("evt_dup", "customer.subscription.updated", "sub_1", nil)

	first := b.post(t, stripeDelivery("stripe-test", body))
	require.Equal(t, http.StatusOK, first.code, "%s", first.raw)
	require.Equal(t, "accepted", first.answer.Status)

	// A redelivery is a new HTTP attempt with a new signature timestamp.
	second := b.post(t, delivery{endpoint: "stripe-test", body: body, header: stripeHeader(body, stripeSecret, time.Now().Add(-time.Minute))})
	require.Equal(t, http.StatusOK, second.code, "%s", second.raw)
	require.Equal(t, "duplicate", second.answer.Status)
	require.Equal(t, "evt_dup", second.answer.EventID)

	requireStoredOnce(t, b.pool, provider.Stripe, "acct_owner", "test", "evt_dup", "stripe/acct_owner/test/subscription/sub_1")
}

func TestConcurrentCopiesOfOneEventRaceOnTheKeyAndStoreOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{})
	body := stripeBody("evt_race", "customer.subscription.updated", "sub_1", nil)

	const copies = 32
	var (
		start = make(chan struct{})
		wg    sync.WaitGroup
		res   = make([]response, copies)
		errs  = make([]error, copies)
	)
	for i := range copies {
		d := stripeDelivery("stripe-test", body)
		wg.Go(func() {
			<-start
			res[i], errs[i] = b.do(t.Context(), d)
		})
	}
	close(start)
	wg.Wait()

	accepted := 0
	for i := range copies {
		require.NoError(t, errs[i])
		require.Equal(t, http.StatusOK, res[i].code, "%s", res[i].raw)
		switch res[i].answer.Status {
		case "accepted":
			accepted++
		case "duplicate":
		default:
			t.Fatalf("copy %d: status %q", i, res[i].answer.Status)
		}
	}
	require.Equal(t, 1, accepted, "exactly one copy is the new event")
	requireStoredOnce(t, b.pool, provider.Stripe, "acct_owner", "test", "evt_race", "stripe/acct_owner/test/subscription/sub_1")
}

func TestEveryAcknowledgedEventIsAlreadyCommittedUnderConcurrency(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{})

	const (
		events  = 200
		senders = 32
	)
	var (
		wg     sync.WaitGroup
		next   = make(chan int)
		mu     sync.Mutex
		failed []string
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failed = append(failed, fmt.Sprintf(format, args...))
	}
	for range senders {
		wg.Go(func() {
			for i := range next {
				id := fmt.Sprintf("evt_many_%03d", i)
				res, err := b.do(t.Context(), stripeDelivery("stripe-test", stripeBody(id, "customer.subscription.updated", fmt.Sprintf("sub_%d", i), nil)))
				if err != nil {
					fail("%s: %v", id, err)
					continue
				}
				if res.code != http.StatusOK || res.answer.Status != "accepted" {
					fail("%s: %d %s", id, res.code, res.raw)
					continue
				}
				// The 200 promises the rows are committed: they must be visible now,
				// from another connection, without waiting.
				var inboxN, outboxN int
				err = b.pool.QueryRow(t.Context(), `SELECT
				    (SELECT count(*) FROM webhook_inbox WHERE provider = 'stripe' AND source_account = 'acct_owner' AND environment = 'test' AND event_id = $1),
				    (SELECT count(*) FROM outbox WHERE message::jsonb->>'event_id' = $1)`, id).Scan(&inboxN, &outboxN)
				if err != nil || inboxN != 1 || outboxN != 1 {
					fail("%s answered 200 but inbox=%d outbox=%d err=%v", id, inboxN, outboxN, err)
				}
			}
		})
	}
	for i := range events {
		next <- i
	}
	close(next)
	wg.Wait()
	require.Empty(t, failed)
	require.Equal(t, events, count(t, b.pool, `SELECT count(*) FROM webhook_inbox`))
	require.Equal(t, events, count(t, b.pool, `SELECT count(*) FROM outbox`))
	require.Equal(t, events, count(t, b.pool, `SELECT count(DISTINCT message::jsonb->>'event_id') FROM outbox`))
}

// deadPool is a pool to an address where no database listens. pgxpool
// connects lazily, so building it succeeds.
func deadPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/x?connect_timeout=1&sslmode=disable")
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

func TestDatabaseDownIsAnswered503NeverSuccess(t *testing.T) {
	t.Parallel()
	b := serve(t, deadPool(t), receiver.Config{CommitTimeout: time.Second})

	for _, d := range []delivery{
		stripeDelivery("stripe-test", stripeBody("evt_down", "customer.subscription.updated", "sub_1", nil)),
		stripeDelivery("stripe-allow", stripeBody("evt_down_ignored", "invoice.paid", "sub_1", nil)),
		stripeDelivery("stripe-test", []byte(`{"not":"an event"}`)), // authenticated but malformed: must be kept, so needs the DB too
	} {
		res := b.post(t, d)
		require.Equal(t, http.StatusServiceUnavailable, res.code, "%s", res.raw)
		require.Equal(t, receiver.CodeUnavailable, res.answer.Error.Code)
		require.NotEmpty(t, res.header.Get("Retry-After"))
		require.Empty(t, res.answer.Status)
	}
}

func TestInboxRowAndOutboxRowCommitTogether(t *testing.T) {
	t.Parallel()

	t.Run("outbox rejects the row", func(t *testing.T) {
		t.Parallel()
		b := setup(t, receiver.Config{CommitTimeout: 5 * time.Second})
		ok := b.post(t, stripeDelivery("stripe-test", stripeBody("evt_before", "customer.subscription.updated", "sub_1", nil)))
		require.Equal(t, http.StatusOK, ok.code, "%s", ok.raw)

		// The inbox insert itself succeeds; only the outbox row fails. Storing
		// the inbox row alone would lose the work, so nothing may be stored.
		_, err := b.pool.Exec(t.Context(), `ALTER TABLE outbox ADD CONSTRAINT refuse_all CHECK (false) NOT VALID`)
		require.NoError(t, err)
		res := b.post(t, stripeDelivery("stripe-test", stripeBody("evt_after", "customer.subscription.updated", "sub_2", nil)))
		require.Equal(t, http.StatusServiceUnavailable, res.code, "%s", res.raw)
		require.Equal(t, receiver.CodeUnavailable, res.answer.Error.Code)
		require.NotEmpty(t, res.header.Get("Retry-After"))
		require.Zero(t, count(t, b.pool, `SELECT count(*) FROM webhook_inbox WHERE event_id = 'evt_after'`))
		require.Equal(t, 1, count(t, b.pool, `SELECT count(*) FROM webhook_inbox`))

		// Once the outbox takes rows again the redelivery is accepted as new.
		_, err = b.pool.Exec(t.Context(), `ALTER TABLE outbox DROP CONSTRAINT refuse_all`)
		require.NoError(t, err)
		res = b.post(t, stripeDelivery("stripe-test", stripeBody("evt_after", "customer.subscription.updated", "sub_2", nil)))
		require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
		require.Equal(t, "accepted", res.answer.Status)
	})

	t.Run("outbox table dropped", func(t *testing.T) {
		t.Parallel()
		b := setup(t, receiver.Config{CommitTimeout: 5 * time.Second})
		_, err := b.pool.Exec(t.Context(), `DROP TABLE outbox`)
		require.NoError(t, err)
		res := b.post(t, stripeDelivery("stripe-test", stripeBody("evt_no_outbox", "customer.subscription.updated", "sub_1", nil)))
		require.Equal(t, http.StatusServiceUnavailable, res.code, "%s", res.raw)
		require.Equal(t, receiver.CodeUnavailable, res.answer.Error.Code)
		require.NotEmpty(t, res.header.Get("Retry-After"))
		require.Zero(t, count(t, b.pool, `SELECT count(*) FROM webhook_inbox`))
	})
}

func TestHealthReadinessAndMetrics(t *testing.T) {
	t.Parallel()

	get := func(t *testing.T, b *bundle, path string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, b.url+path, nil)
		require.NoError(t, err)
		res, err := b.client.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(body)
	}

	t.Run("live database", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		b := setup(t, receiver.Config{Registerer: reg, Gatherer: reg})
		code, _ := get(t, b, "/healthz")
		require.Equal(t, http.StatusOK, code)
		code, body := get(t, b, "/readyz")
		require.Equal(t, http.StatusOK, code, body)

		res := b.post(t, stripeDelivery("stripe-test", stripeBody("evt_metric", "customer.subscription.updated", "sub_1", nil)))
		require.Equal(t, http.StatusOK, res.code)
		n, ok, err := promread.Sum(reg, "hookyard_receiver_events_total", map[string]string{"result": "accepted"})
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, 1.0, n)
		// The public port serves webhooks and probes only; metrics are on METRICS_ADDR.
		code, _ = get(t, b, "/metrics")
		require.Equal(t, http.StatusNotFound, code)
	})

	t.Run("dead database", func(t *testing.T) {
		t.Parallel()
		b := serve(t, deadPool(t), receiver.Config{CommitTimeout: time.Second})
		code, _ := get(t, b, "/healthz")
		require.Equal(t, http.StatusOK, code, "alive even when the database is not")
		code, body := get(t, b, "/readyz")
		require.Equal(t, http.StatusServiceUnavailable, code, body)
		require.JSONEq(t, `{"status":"unavailable"}`, body, "no database error text on the public port")
	})
}

func TestNewRefusesBadEndpointConfig(t *testing.T) {
	t.Parallel()
	pool := deadPool(t)

	_, err := receiver.New(pool, discardLog(), receiver.Config{Endpoints: []provider.Endpoint{{ID: "x", Provider: "paypal"}}})
	require.ErrorContains(t, err, `"x"`)

	eps := endpoints()
	eps = append(eps, eps[0])
	_, err = receiver.New(pool, discardLog(), receiver.Config{Endpoints: eps})
	require.ErrorContains(t, err, "defined twice")
}
