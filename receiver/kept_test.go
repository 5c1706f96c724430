package receiver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/receiver"
)

func TestAuthenticatedMalformedDeliveryIsKeptDead(t *testing.T) {
	t.Parallel()

	cases := []struct {
		name string
		body []byte
	}{
		{"not JSON", []byte(`this is not json {`)},
		{"JSON without id", []byte(`{"object":"event","type":"customer.subscription.updated","livemode":false}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, receiver.Config{})
			for attempt := range 2 {
				res := b.post(t, stripeDelivery("stripe-test", tc.body))
				require.Equal(t, http.StatusBadRequest, res.code, "attempt %d: %s", attempt, res.raw)
				require.Equal(t, receiver.CodeMalformed, res.answer.Error.Code)
				require.True(t, res.answer.Kept, "the answer says the delivery was kept: %s", res.raw)

				rows := inboxRows(t, b.pool)
				require.Len(t, rows, 1, "a repeat of a malformed delivery stays one row")
				r := rows[0]
				require.Equal(t, "dead", r.Status)
				require.Equal(t, "acct_owner", r.SourceAccount)
				require.Equal(t, "test", r.Environment)
				require.True(t, strings.HasPrefix(r.EventID, "malformed-"), r.EventID)
				require.NotNil(t, r.LastError)
				require.NotEmpty(t, *r.LastError)
				require.Equal(t, tc.body, r.Body, "the bytes are kept, once")
				require.Empty(t, outboxRows(t, b.pool), "a dead delivery creates no work")
			}
		})
	}
}

func TestAuthenticatedEventThatJSONBCannotHoldIsStillStored(t *testing.T) {
	t.Parallel()

	// encoding/json accepts all of these; Postgres' jsonb refuses them. An
	// authenticated event must still be stored (as raw bytes) rather than fail
	// its statement and be answered 503 on every redelivery.
	cases := []struct {
		name  string
		field string // raw JSON value of an extra top-level field
	}{
		{"NUL escape", `"a\u0000b"`},
		{"unpaired high surrogate", `"\ud800"`},
		{"unpaired low surrogate", `"x\udc00y"`},
		{"high surrogate before non-surrogate", `"\ud800\u0041"`},
		{"invalid UTF-8", "\"\xff\xfe\""},
		{"number beyond numeric", `1e999999`},
		{"number below numeric", `1e-999999`},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, receiver.Config{})
			id := fmt.Sprintf("evt_odd_%d", i)
			good := stripeBody(id, "customer.subscription.updated", "sub_1", nil)
			body := append(append(bytes.TrimSuffix(good, []byte("}")), []byte(`,"extra":`+tc.field)...), '}')

			res := b.post(t, stripeDelivery("stripe-test", body))
			require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
			require.Equal(t, "accepted", res.answer.Status)
			requireStoredOnce(t, b.pool, provider.Stripe, "acct_owner", "test", id, "stripe/acct_owner/test/subscription/sub_1")
			require.Equal(t, body, inboxRows(t, b.pool)[0].Body, "the bytes are kept exactly")
		})
	}
}

func TestEventIdentityPostgresCannotStoreIsKeptDeadNot503(t *testing.T) {
	t.Parallel()

	// An authenticated event whose identity Postgres cannot store or index
	// would fail its whole batch with 503 forever; it is kept dead instead.
	stripeWith := func(id, sub string) func() delivery {
		return func() delivery {
			return stripeDelivery("stripe-test", stripeBody(id, "customer.subscription.updated", sub, nil))
		}
	}
	cases := []struct {
		name     string
		delivery func() delivery
	}{
		{"NUL in event id", stripeWith("evt_\u0000", "sub_1")},
		{"NUL in resource id", stripeWith("evt_nul_sub", "sub_\u0000")},
		{"event id beyond a btree entry", stripeWith("evt_"+randomHex(4000), "sub_1")},
		{"resource id beyond a btree entry", stripeWith("evt_long_sub", "sub_"+randomHex(4000))},
		{"invalid UTF-8 in the unsigned GitHub delivery header", func() delivery {
			body := []byte(`{"action":"opened","repository":{"id":1296269,"full_name":"octo/widgets"}}`)
			return delivery{endpoint: "github-prod", body: body, header: http.Header{
				github.SignatureHeader: {github.Sign(body, githubSecret)},
				github.DeliveryHeader:  {"d-\xff\xfe"}, github.EventHeader: {"issues"},
			}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, receiver.Config{BodyLimit: 64 << 10})
			res := b.post(t, tc.delivery())
			require.Equal(t, http.StatusBadRequest, res.code, "%s", res.raw)
			require.Equal(t, receiver.CodeMalformed, res.answer.Error.Code)
			require.True(t, res.answer.Kept)
			rows := inboxRows(t, b.pool)
			require.Len(t, rows, 1)
			require.Equal(t, "dead", rows[0].Status)
			require.Empty(t, outboxRows(t, b.pool))
		})
	}
}

func randomHex(n int) string {
	// Deterministic but incompressible enough that btree compression cannot save it.
	var sb strings.Builder
	x := uint64(0x9E3779B97F4A7C15)
	for sb.Len() < n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		fmt.Fprintf(&sb, "%016x", x)
	}
	return sb.String()[:n]
}

// A Chargebee snapshot whose version lies more than a day ahead is kept dead
// under its own identity with outcome version_from_future, answered 400 with
// kept:true, and never sent on to be applied.
func TestVersionFromTheFutureIsKeptDeadNeverApplied(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{})
	future := time.Now().Add(48 * time.Hour).UnixMilli()
	body := []byte(fmt.Sprintf(`{"id":"ev_future","event_type":"subscription_changed","content":{"subscription":{"id":"sub_cb_f","status":"active","resource_version":%d}}}`, future))
	h := http.Header{}
	h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth(chargebeeUser, chargebeePass))
	res := b.post(t, delivery{endpoint: "chargebee-test", header: h, body: body})
	require.Equal(t, http.StatusBadRequest, res.code, "%s", res.raw)
	require.Equal(t, receiver.CodeVersionFromFuture, res.answer.Error.Code)
	require.True(t, res.answer.Kept)

	var status, outcome string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT status, outcome FROM webhook_inbox WHERE event_id = 'ev_future'`).Scan(&status, &outcome))
	require.Equal(t, "dead", status)
	require.Equal(t, "version_from_future", outcome)
	require.Empty(t, outboxRows(t, b.pool), "never sent on to be applied")
}

// An authenticated event whose data Postgres refuses at intake (here a CHECK
// on the ledger row; bodies are bytea, which takes any bytes) is
// kept dead under its own identity with its bytes and a safe reason, and
// answered 400 kept:true — never 503 on every redelivery. The other
// requests of its batch are stored as usual.
func TestEventPostgresRefusesIsKeptDeadNot503(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{})
	_, err := b.pool.Exec(t.Context(), `ALTER TABLE webhook_inbox ADD CONSTRAINT refuse_poison CHECK (status = 'dead' OR resource_id <> 'sub_poison')`)
	require.NoError(t, err)

	body := stripeBody("evt_refused", "customer.subscription.updated", "sub_poison", map[string]any{"poison": "\xff"})
	res := b.post(t, stripeDelivery("stripe-test", body))
	require.Equal(t, http.StatusBadRequest, res.code, "%s", res.raw)
	require.Equal(t, receiver.CodeMalformed, res.answer.Error.Code)
	require.True(t, res.answer.Kept)

	var status, outcome, lastErr string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT status, outcome, last_error FROM webhook_inbox WHERE event_id = 'evt_refused'`).
		Scan(&status, &outcome, &lastErr))
	raw := inboxRows(t, b.pool)[0].Body
	require.Equal(t, "dead", status)
	require.Equal(t, "malformed", outcome)
	require.Contains(t, lastErr, "SQLSTATE 23514")
	require.Equal(t, body, raw, "the bytes are kept")
	require.Empty(t, outboxRows(t, b.pool))

	// A redelivery is a duplicate, not another refusal.
	res = b.post(t, stripeDelivery("stripe-test", body))
	require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
	require.Equal(t, "duplicate", res.answer.Status)
	res = b.post(t, stripeDelivery("stripe-test", stripeBody("evt_fine", "customer.subscription.updated", "sub_1", nil)))
	require.Equal(t, http.StatusOK, res.code)
}
