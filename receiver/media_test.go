package receiver_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/github"
	"github.com/hookyard/hookyard/receiver"
)

// A GitHub webhook's default content type is
// application/x-www-form-urlencoded, the JSON in the form's payload field
// (https://docs.github.com/en/webhooks/using-webhooks/creating-webhooks),
// signed over the form as sent. The receiver asks the endpoint's provider
// which media types it reads: GitHub's form delivery is accepted and
// stored as its JSON payload, the same media type on a Stripe endpoint is
// still 415. Fails if the receiver admits application/json only, or stores
// the form instead of the JSON.
func TestGitHubFormDeliveryIsAcceptedAndStoredAsJSON(t *testing.T) {
	t.Parallel()
	b := setup(t, receiver.Config{})
	doc := `{"action":"opened","issue":{"number":1,"title":"a b&c=d"},"repository":{"id":1296269,"full_name":"octo/widgets"}}`
	body := []byte(url.Values{"payload": {doc}}.Encode())
	h := http.Header{}
	h.Set(github.SignatureHeader, github.Sign(body, githubSecret))
	h.Set(github.DeliveryHeader, "form-delivery-1")
	h.Set(github.EventHeader, "issues")
	res := b.post(t, delivery{endpoint: "github-prod", header: h, body: body,
		contentType: "application/x-www-form-urlencoded"})
	require.Equal(t, http.StatusOK, res.code, "%s", res.raw)
	require.Equal(t, "accepted", res.answer.Status)

	rows := inboxRows(t, b.pool)
	require.Len(t, rows, 1)
	require.Equal(t, "form-delivery-1", rows[0].EventID)
	payload := rows[0].Body
	var got, want any
	require.NoError(t, json.Unmarshal(payload, &got))
	require.NoError(t, json.Unmarshal([]byte(doc), &want))
	require.Equal(t, want, got, "the stored payload is the JSON document the form carried")

	sd := stripeDelivery("stripe-test", stripeBody("evt_form", "customer.subscription.updated", "sub_1", nil))
	sd.contentType = "application/x-www-form-urlencoded"
	res = b.post(t, sd)
	require.Equal(t, http.StatusUnsupportedMediaType, res.code, "%s", res.raw)
	require.Equal(t, receiver.CodeUnsupportedMedia, res.answer.Error.Code)
}
