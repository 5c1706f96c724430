package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/ops/api"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/processor"
)

// changesTopic reads the whole changes topic from its start, once the
// outbox is empty (every record acknowledged, so the end offsets say how
// many there are), and returns each record's key and value in topic order.
func changesTopic(t *testing.T, p *pipelinetest.Pipeline) (keys, values []string) {
	t.Helper()
	for _, r := range p.ChangeRecords(t) {
		keys, values = append(keys, string(r.Key)), append(values, string(r.Value))
	}
	return keys, values
}

// latest keeps the last record of each key: what compaction leaves.
func latest(keys, values []string) map[string]string {
	out := map[string]string{}
	for i, k := range keys {
		out[k] = values[i]
	}
	return out
}

// After an erasure, the compacted changes topic read from its beginning
// with only the latest record of each key kept (what compaction leaves)
// holds none of the erased customer's values: the erasure published, for
// each erased projection, a change record with its emptied state under the
// same key, and said how many. The records before it did hold them (so the
// check can fail), another account's latest record still does, and every
// record stays a valid change of its key. Fails if the erasure publishes
// no record, publishes it under another key, or publishes a state that
// still holds the data.
func TestEraseSupersedesTheCustomersRecordsOnTheChangesTopic(t *testing.T) {
	t.Parallel()
	eps := []provider.Endpoint{
		{ID: "cb-a", Provider: provider.Chargebee, SourceAccount: "site-a", Environment: "test", Secrets: []string{"u:p"}},
		{ID: "cb-b", Provider: provider.Chargebee, SourceAccount: "site-b", Environment: "test", Secrets: []string{"u:p"}},
	}
	p := pipelinetest.New(t, pipelinetest.Options{Endpoints: eps, Processor: func(c *processor.Config) {
		c.StateFields = []string{"shipping_address", "billing_address"}
		c.Facts = fact.Declarations{{Provider: "chargebee", Type: "invoice_paid", Fields: []string{"id", "total", "billing_address"}}}
	}})
	seedCustomer(t, p, "cb-a", "sub_jane", "inv_jane", 5, jane)
	seedCustomer(t, p, "cb-b", "sub_bob", "inv_bob", 2, bob)
	p.WaitIdle()
	holds := func(values []string, who person) int {
		n := 0
		for _, v := range values {
			for _, pv := range who.values() {
				if strings.Contains(v, pv) {
					n++
					break
				}
			}
		}
		return n
	}
	_, before := changesTopic(t, p)
	require.Positive(t, holds(before, jane), "the changes topic holds Jane's data before the erasure")

	ops := httptest.NewServer(api.New(p.Pool, p.Log, api.Config{Token: pipelinetest.OpsToken, ChangesTopic: p.Kafka.ChangesTopic}))
	t.Cleanup(ops.Close)
	var out api.Erased
	require.Equal(t, http.StatusOK, send(t, http.MethodPost, ops.URL+"/v1/erase", pipelinetest.OpsToken,
		api.EraseRequest{Provider: "chargebee", Account: "site-a", Environment: "test", Resources: []string{"sub_jane"}}, &out))
	require.EqualValues(t, 1, out.Rows["projection"], "%v", out.Rows)
	require.EqualValues(t, 1, out.Changes, "one change record per erased projection, in erase's output")
	p.WaitIdle()

	keys, values := changesTopic(t, p)
	require.Len(t, keys, len(before)+1)
	last := latest(keys, values)
	janeKey := cbRes("sub_jane").Key()
	require.Contains(t, last, janeKey)
	for k, v := range last {
		c, err := message.DecodeChange([]byte(v))
		require.NoError(t, err, "%s", v)
		require.Equal(t, c.Resource.Key(), k)
		require.Zero(t, holds([]string{v}, jane), "the latest record of %s holds Jane's data: %s", k, v)
	}
	erased, err := message.DecodeChange([]byte(last[janeKey]))
	require.NoError(t, err)
	require.JSONEq(t, `{}`, string(erased.State))
	require.EqualValues(t, 5, *erased.Version, "the version stays: the record is the erased projection")
	require.Equal(t, "active", erased.Status)
	require.Equal(t, 1, holds([]string{last["chargebee/site-b/test/subscription/sub_bob"]}, bob), "another account's record is left")
}
