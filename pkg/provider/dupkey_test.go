package provider_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Go's encoding/json matches keys case-insensitively and keeps the last of
// duplicates; Postgres jsonb keeps the last of exact duplicates and compares
// case-sensitively. A body where the two readings can differ must be refused
// as malformed, at any depth, whatever the escapes spell.
func TestPayloadWithDuplicateKeysIsMalformedAtAnyDepth(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"a":1,"a":2}`,
		`{"resource_version":1,"Resource_version":2}`,
		`{"content":{"subscription":{"resource_version":9000000000000000000,"Resource_version":1700000000000}}}`,
		`{"list":[{"x":1},{"id":1,"ID":2}]}`,
		`{"a\u0062":1,"ab":2}`,
		`{"\u0041":1,"a":2}`,
		"{\"k\":1,\"\u212a\":2}", // KELVIN SIGN folds to k in encoding/json
		`[[[{"deep":{"deeper":{"x":1,"X":1}}}]]]`,
	} {
		err := provider.CheckUniqueKeys([]byte(body))
		require.ErrorIs(t, err, provider.ErrMalformed, body)
		require.ErrorIs(t, err, provider.ErrDuplicateKey, body)
	}
	for _, body := range []string{
		`{}`, `[]`, `"s"`, `12`, `null`,
		`{"a":1,"b":{"a":1},"c":[{"a":1},{"a":2}]}`,
		`{"a":"{\"a\":1,\"a\":2}"}`, // keys inside a string are text
		`{"ab":1,"a\\b":2,"a\"b":3}`,
		` { "x" : [ 1 , 2.5e3 , true , false , null ] , "y" : { } } `,
	} {
		require.NoError(t, provider.CheckUniqueKeys([]byte(body)), body)
	}
	many := make([]string, 0, 300)
	for i := range 300 {
		many = append(many, `"key`+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26))+`":1`)
	}
	require.NoError(t, provider.CheckUniqueKeys([]byte("{"+strings.Join(many, ",")+"}")))
	require.ErrorIs(t, provider.CheckUniqueKeys([]byte("{"+strings.Join(many, ",")+`,"KEYAA":2}`)), provider.ErrDuplicateKey)
}

// benchBody is a Chargebee subscription event of ordinary size.
var benchBody = []byte(`{"id":"ev_16BPgETyVrQbiGhA","occurred_at":1700000000,"source":"admin_console","object":"event","api_version":"v2","event_type":"subscription_cancelled","content":{"subscription":{"id":"sub_42","customer_id":"cus_1","status":"cancelled","resource_version":1700000000123,"items":[{"item_price_id":"basic-USD","quantity":1,"amount":1000},{"item_price_id":"addon-USD","quantity":2,"amount":500}]},"customer":{"id":"cus_1","email":"a@example.com","first_name":"A","resource_version":1699999999000,"billing_address":{"line1":"x","city":"y","country":"US"}}}}`)

// The check runs on every delivery: it must stay a single pass without
// allocating per key for ordinary payloads.
func BenchmarkCheckUniqueKeys(b *testing.B) {
	body := benchBody
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := provider.CheckUniqueKeys(body); err != nil {
			b.Fatal(err)
		}
	}
}

// For scale: what intake's decoding of the same body costs.
func BenchmarkUnmarshalForComparison(b *testing.B) {
	body := benchBody
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}
