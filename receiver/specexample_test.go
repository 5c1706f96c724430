package receiver_test

import (
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/config"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/pkg/provider/standardwebhooks"
	"github.com/hookyard/hookyard/receiver"
)

// The Standard Webhooks specification's own example payloads ("Payload
// structure" and its full and thin contact.created examples,
// https://github.com/standard-webhooks/standard-webhooks/blob/main/spec/standard-webhooks.md#payload-structure)
// carry no version: a sender that follows the spec sends none. Posted to
// the example config's standard-dev endpoint, exactly as pkg/config loads
// it, each is accepted. Fails if the example config demands a version the
// spec's payloads do not carry (they were kept dead as malformed).
func TestSpecExamplePayloadIsAcceptedByTheExampleConfigsStandardEndpoint(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../hookyard.example.yaml")
	require.NoError(t, err)
	cfg, err := config.Parse(raw, func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	var ep provider.Endpoint
	for _, e := range cfg.Endpoints {
		if e.ID == "standard-dev" {
			ep = e
		}
	}
	require.Equal(t, provider.StandardWebhooks, ep.Provider)
	b := setup(t, receiver.Config{Endpoints: []provider.Endpoint{ep}})

	for id, body := range map[string]string{
		"msg_spec_full": `{
  "type": "contact.created",
  "timestamp": "2022-11-03T20:26:10.344522Z",
  "data": {
    "id": "1f81eb52-5198-4599-803e-771906343485",
    "type": "contact",
    "fullName": "John Smith",
    "address": "800 W NASA Pkwy, Webster, TX 77598, USA",
    "phoneNumber": "(281) 332-2575",
    "birthday": "1980-04-19",
    "occupation": "Engineer, ACME"
  }
}`,
		"msg_spec_thin":      `{"type":"contact.created","timestamp":"2022-11-03T20:26:10.344522Z","data":{"id":"1f81eb52-5198-4599-803e-771906343485"}}`,
		"msg_spec_structure": `{"type":"example.event","timestamp":"2022-11-03T20:26:10.344522Z","data":{"foo":"bar","fizzbuzz":2}}`,
	} {
		h, err := standardwebhooks.Sign(ep.Secrets[0], id, time.Now(), []byte(body))
		require.NoError(t, err)
		res := b.post(t, delivery{endpoint: "standard-dev", header: h, body: []byte(body)})
		require.Equal(t, http.StatusOK, res.code, "%s: %s", id, res.raw)
		require.Equal(t, "accepted", res.answer.Status, id)
	}
}
