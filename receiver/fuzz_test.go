package receiver_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/dbtest"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/receiver"
)

// fuzzEndpoints: index len(fuzzEndpoints) and above is an unknown endpoint.
var fuzzEndpoints = []provider.Endpoint{
	{ID: "stripe-test", Provider: provider.Stripe, SourceAccount: "acct_owner", Environment: "test", Secrets: []string{stripeSecret}},
	{ID: "stripe-live", Provider: provider.Stripe, SourceAccount: "acct_owner", Environment: "live", Secrets: []string{stripeSecret},
		EventTypes: []string{"customer.subscription.*"}},
	{ID: "chargebee-test", Provider: provider.Chargebee, SourceAccount: "site_owner", Environment: "test",
		Secrets: []string{chargebeeUser + ":" + chargebeePass}},
	{ID: "github-prod", Provider: provider.GitHub, SourceAccount: "org_owner", Environment: "prod", Secrets: []string{githubSecret}},
}

// carriesStripeSignature reports whether header holds, for one of its
// timestamps, the v1 HMAC of body under secret, i.e. whether whoever built
// it knew the secret. It parses more loosely than stripe-go does, so it
// never calls a forgery "unsigned".
func carriesStripeSignature(header string, body []byte, secret string) bool {
	var ts []int64
	var sigs [][]byte
	for pair := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				ts = append(ts, n)
			}
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	for _, t := range ts {
		_, want, _ := strings.Cut(stripe.Sign(body, secret, time.Unix(t, 0)), ",v1=")
		w, err := hex.DecodeString(want)
		if err != nil {
			continue
		}
		for _, s := range sigs {
			if bytes.Equal(s, w) {
				return true
			}
		}
	}
	return false
}

var knownCodes = map[string]bool{
	receiver.CodeUnknownEndpoint: true, receiver.CodeUnsupportedMedia: true, receiver.CodeTooLarge: true,
	receiver.CodeInvalidSignature: true, receiver.CodeStaleSignature: true, receiver.CodeMalformed: true,
	receiver.CodeScope: true,
}

// FuzzReceiver drives the real handler with arbitrary endpoint, content
// type, Stripe-Signature and body. With sign set the body is signed with the
// real secret, so the fuzzer also explores what authenticated senders can
// send. It checks that
//   - nothing panics, and with a live database nothing is answered 5xx;
//   - no 2xx without a signature made with the endpoint's secret;
//   - every 2xx, and every "kept" refusal, has its inbox row committed;
//   - every refusal carries a known machine-readable code.
func FuzzReceiver(f *testing.F) {
	s := dbtest.New(f)
	// The fuzzer runs thousands of commits a second, and minimizing an input
	// replays it many times: without waiting for each commit's fsync. Commit
	// visibility, which the assertions rely on, is the same.
	pcfg, err := pgxpool.ParseConfig(dbtest.URL())
	require.NoError(f, err)
	pcfg.ConnConfig.RuntimeParams["search_path"] = s.Name
	pcfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(f.Context(), pcfg)
	require.NoError(f, err)
	f.Cleanup(pool.Close)
	s = &dbtest.Schema{Name: s.Name, Pool: pool}

	rcv, err := receiver.New(s.Pool, discardLog(), receiver.Config{
		Endpoints: fuzzEndpoints, BodyLimit: 64 << 10, CommitTimeout: 30 * time.Second,
	})
	require.NoError(f, err)
	f.Cleanup(rcv.Stop)
	h := rcv.Handler()

	now := time.Now()
	valid := stripeBody("evt_seed", "customer.subscription.updated", "sub_seed", nil)
	live := stripeBody("evt_seed_live", "customer.subscription.created", "sub_seed", map[string]any{"livemode": true})
	f.Add(uint8(0), "application/json", stripe.Sign(valid, stripeSecret, now), valid, false)
	f.Add(uint8(1), "application/json; charset=utf-8", stripe.Sign(live, stripeSecret, now), live, false)
	f.Add(uint8(0), "application/json", stripe.Sign(valid, stripeSecret, now)+",v1=00", valid, false)
	f.Add(uint8(0), "application/json", stripe.Sign(valid, "whsec_wrong", now), valid, false)
	f.Add(uint8(0), "application/json", stripe.Sign(valid, stripeSecret, now.Add(-time.Hour)), valid, false)
	f.Add(uint8(0), "text/plain", stripe.Sign(valid, stripeSecret, now), valid, false)
	f.Add(uint8(2), "application/json", "", []byte(`{"id":"ev_1","event_type":"subscription_created","content":{}}`), false)
	f.Add(uint8(3), "application/json", "t=1,v1=", []byte(`{}`), false)
	f.Add(uint8(7), "application/json", "", valid, true)
	f.Add(uint8(0), "application/json", "", []byte(`not json`), true)
	f.Add(uint8(0), "application/json", "", []byte(`{"id":"evt_x"}`), true)
	f.Add(uint8(1), "application/json", "", []byte(`{"id":"evt_l","type":"invoice.paid","livemode":true}`), true)
	f.Add(uint8(0), "application/json", "", []byte(`{"id":"evt_a","type":"x","account":"acct_other"}`), true)
	f.Add(uint8(0), "application/json", "", []byte(`{"id":"evt_n","type":"x","n":"\u0000"}`), true)
	f.Add(uint8(0), "application/json", "", []byte(`{"id":"evt_s","type":"x","n":"\ud800"}`), true)
	f.Add(uint8(0), "application/json", "", []byte(`{"id":"evt_e","type":"x","n":1e999999}`), true)
	f.Add(uint8(0), "application/json", "", []byte("{\"id\":\"evt_u\",\"type\":\"x\",\"n\":\"\xff\"}"), true)
	f.Add(uint8(0), "application/json", "", []byte(`{"id":"evt_\u0000","type":"x"}`), true)
	f.Add(uint8(0), "application/json", "", []byte(`{"id":"evt_t","type":"x\u0000"}`), true)

	f.Fuzz(func(t *testing.T, epIdx uint8, contentType, sig string, body []byte, sign bool) {
		var ep *provider.Endpoint
		id := "unknown"
		if int(epIdx) < len(fuzzEndpoints) {
			ep = &fuzzEndpoints[epIdx]
			id = ep.ID
		}
		if sign {
			sig = stripe.Sign(body, stripeSecret, time.Now())
		}
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/webhooks/"+id, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set(stripe.SignatureHeader, sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		code := rec.Code
		require.Less(t, code, 500, "live database: %s", rec.Body.Bytes())
		var a answer
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &a), "%d %q", code, rec.Body.Bytes())

		if code >= 200 && code < 300 {
			require.NotNil(t, ep, "2xx for an unknown endpoint")
			require.Equal(t, provider.Stripe, ep.Provider, "2xx without the endpoint's credentials")
			require.True(t, carriesStripeSignature(sig, body, stripeSecret), "2xx without a signature made with the secret")
			mt, _, err := mime.ParseMediaType(contentType)
			require.NoError(t, err)
			require.Equal(t, "application/json", mt)
			require.Contains(t, []string{"accepted", "duplicate", "ignored"}, a.Status)
			require.Equal(t, 1, countRow(t, s, ep, a.EventID), "2xx before the row was committed")
			return
		}
		require.True(t, knownCodes[a.Error.Code], "refusal %d with code %q", code, a.Error.Code)
		if a.Kept {
			require.Equal(t, receiver.CodeMalformed, a.Error.Code)
			require.True(t, carriesStripeSignature(sig, body, stripeSecret), "kept an unauthenticated delivery")
			sum := sha256.Sum256(body)
			require.Equal(t, 1, countRow(t, s, ep, "malformed-"+hex.EncodeToString(sum[:16])), "kept but not stored")
		}
	})
}

func countRow(t *testing.T, s *dbtest.Schema, ep *provider.Endpoint, eventID string) int {
	t.Helper()
	var n int
	require.NoError(t, s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_inbox
WHERE provider = $1 AND source_account = $2 AND environment = $3 AND event_id = $4`,
		ep.Provider, ep.SourceAccount, ep.Environment, eventID).Scan(&n))
	return n
}
