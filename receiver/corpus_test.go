package receiver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/chargebee"
	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/receiver"
)

// hostile is one request of the corpus: authenticated or not, and what a
// receiver may answer to it.
type hostile struct {
	name          string
	authenticated bool
	d             delivery
}

// deep is n nested arrays around a value, beyond what encoding/json (10,000)
// and Postgres' jsonb (stack depth) take.
func deep(n int) string { return strings.Repeat("[", n) + "1" + strings.Repeat("]", n) }

// withExtra adds a raw JSON member to a Stripe event body.
func withExtra(id, member string) []byte {
	good := stripeBody(id, "customer.subscription.updated", "sub_corpus", nil)
	return append(append(bytes.TrimSuffix(good, []byte("}")), []byte(","+member)...), '}')
}

func hostileCorpus(t *testing.T) []hostile {
	now := time.Now()
	signed := func(id, member string) delivery { return stripeDelivery("stripe-test", withExtra(id, member)) }
	var out []hostile
	add := func(name string, auth bool, d delivery) { out = append(out, hostile{name, auth, d}) }

	// Authenticated, with content Postgres or encoding/json refuses.
	add("NUL escape in a key", true, signed("evt_c_nulkey", `"a\u0000b":1`))
	add("NUL escape in a value", true, signed("evt_c_nulval", `"x":"a\u0000b"`))
	add("raw NUL byte", true, signed("evt_c_rawnul", "\"x\":\"a\x00b\""))
	add("invalid UTF-8 in a key", true, signed("evt_c_utf8key", "\"\xff\":1"))
	add("invalid UTF-8 in a value", true, signed("evt_c_utf8", "\"x\":\"\xc3\x28\""))
	add("number beyond float64", true, signed("evt_c_huge", `"x":1e400`))
	add("number beyond numeric", true, signed("evt_c_huger", `"x":1e999999`))
	add("long number", true, signed("evt_c_long", `"x":`+strings.Repeat("9", 5000)))
	add("10,000-deep nesting", true, signed("evt_c_deep", `"x":`+deep(10_000)))
	add("3,000-deep nesting", true, signed("evt_c_deep3k", `"x":`+deep(3_000)))
	add("duplicate keys", true, signed("evt_c_dupkey", `"id":"evt_c_dupkey_2"`))
	add("not JSON", true, stripeDelivery("stripe-test", []byte(`not json at all`)))
	add("JSON array", true, stripeDelivery("stripe-test", []byte(`[1,2,3]`)))
	add("empty body", true, stripeDelivery("stripe-test", nil))
	{
		body := withExtra("evt_c_two_sigs", `"x":1`)
		d := stripeDelivery("stripe-test", body)
		d.header.Add("Stripe-Signature", "t=1,v1=00")
		add("duplicate signature headers, first valid", true, d)
	}
	{
		body := []byte(`{"id":"ev_c_cb","event_type":"subscription_changed","occurred_at":1700000000,"content":{"subscription":{"id":"sub_cb","resource_version":1,"k\u0000":1}}}`)
		h := http.Header{}
		h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth(chargebeeUser, chargebeePass))
		add("chargebee NUL key", true, delivery{endpoint: "chargebee-test", header: h, body: body})
	}
	{
		body := []byte(`{"action":"opened","repository":{"id":1296269,"full_name":"octo/widgets"},"x":` + deep(10_000) + `}`)
		h := http.Header{github.SignatureHeader: {github.Sign(body, githubSecret)}, github.DeliveryHeader: {"c-deep"}, github.EventHeader: {"issues"}}
		add("github deep nesting", true, delivery{endpoint: "github-prod", header: h, body: body})
	}
	{
		body := []byte(`{"type":"subscription.updated","data":{"id":"sub_sw","version":1e400,"k\u0000":"\ud800"}}`)
		h, err := standardwebhooks.Sign(standardSecret, "msg_c_sw", now, body)
		require.NoError(t, err)
		add("standard webhooks odd version and NUL key", true, delivery{endpoint: "standard-test", header: h, body: body})
	}

	// Not authenticated: never a 2xx, never a row.
	good := withExtra("evt_c_unauth", `"x":1`)
	add("no signature", false, delivery{endpoint: "stripe-test", body: good})
	add("wrong secret", false, delivery{endpoint: "stripe-test", header: stripeHeader(good, "whsec_wrong", now), body: good})
	add("signature over other bytes", false, delivery{endpoint: "stripe-test", header: stripeHeader([]byte(`{}`), stripeSecret, now), body: good})
	add("replayed timestamp", false, delivery{endpoint: "stripe-test", header: stripeHeader(good, stripeSecret, now.Add(-time.Hour)), body: good})
	add("future timestamp", false, delivery{endpoint: "stripe-test", header: stripeHeader(good, stripeSecret, now.Add(time.Hour)), body: good})
	{
		d := delivery{endpoint: "stripe-test", header: stripeHeader(good, stripeSecret, now), body: good}
		d.header.Set("Stripe-Signature", d.header.Get("Stripe-Signature")+"0")
		add("truncated-then-extended signature", false, d)
	}
	{
		h := http.Header{"Stripe-Signature": {"t=1,v1=00", stripeHeader(good, stripeSecret, now).Get("Stripe-Signature")}}
		add("duplicate signature headers, first invalid", false, delivery{endpoint: "stripe-test", header: h, body: good})
	}
	{
		// Two t= elements: the valid pair plus a later t= that a reader
		// taking the last one would judge instead.
		sig := stripeHeader(good, stripeSecret, now).Get("Stripe-Signature") + fmt.Sprintf(",t=%d", now.Add(time.Hour).Unix())
		add("two timestamps in one signature header", false, delivery{endpoint: "stripe-test", header: http.Header{"Stripe-Signature": {sig}}, body: good})
	}
	add("wrong content type", false, delivery{endpoint: "stripe-test", header: stripeHeader(good, stripeSecret, now), body: good, contentType: "text/plain"})
	add("oversized", false, stripeDelivery("stripe-test", withExtra("evt_c_big", `"pad":"`+strings.Repeat("x", 2<<20)+`"`)))
	add("oversized chunked", false, func() delivery {
		d := stripeDelivery("stripe-test", withExtra("evt_c_bigc", `"pad":"`+strings.Repeat("x", 2<<20)+`"`))
		d.chunked = true
		return d
	}())
	add("unknown endpoint", false, stripeDelivery("nope", good))
	{
		h := http.Header{}
		h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth(chargebeeUser, ""))
		add("chargebee empty password", false, delivery{endpoint: "chargebee-test", header: h, body: []byte(`{"id":"ev_x","event_type":"subscription_changed","content":{}}`)})
	}
	{
		body := []byte(`{"action":"opened","repository":{"id":1296269,"full_name":"octo/widgets"}}`)
		h := http.Header{github.SignatureHeader: {github.Sign(body, "other")}, github.DeliveryHeader: {"c-bad"}, github.EventHeader: {"issues"}}
		add("github wrong secret", false, delivery{endpoint: "github-prod", header: h, body: body})
	}
	return out
}

// A corpus of hostile requests against a running receiver: no 2xx without
// authentication and no row for it; no 5xx at all (the database is up, and
// 503 is the only 5xx the receiver documents); every authenticated delivery
// is either accepted or kept (400 with kept:true), never lost.
func TestHostileCorpusNeverAuthenticatesNorLoses(t *testing.T) {
	t.Parallel()
	b := listen(t, receiver.Config{})
	for _, h := range hostileCorpus(t) {
		before := count(t, b.pool, `SELECT count(*) FROM webhook_inbox`)
		res, err := b.do(t.Context(), h.d)
		require.NoError(t, err, h.name)
		require.Less(t, res.code, 500, "%s: %d %s", h.name, res.code, res.raw)
		after := count(t, b.pool, `SELECT count(*) FROM webhook_inbox`)
		if !h.authenticated {
			require.False(t, res.code >= 200 && res.code < 300, "%s: unauthenticated got %d", h.name, res.code)
			require.Equal(t, before, after, "%s: a row without authentication", h.name)
			continue
		}
		switch {
		case res.code == http.StatusOK:
			require.Contains(t, []string{"accepted", "duplicate", "ignored"}, res.answer.Status, h.name)
		case res.code == http.StatusBadRequest && res.answer.Kept:
		default:
			t.Fatalf("%s: authenticated delivery answered %d %s: neither accepted nor kept", h.name, res.code, res.raw)
		}
		require.Equal(t, before+1, after, fmt.Sprintf("%s: authenticated delivery stored once", h.name))
	}
}
