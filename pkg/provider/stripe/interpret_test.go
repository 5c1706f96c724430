package stripe

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

func TestInterpret(t *testing.T) {
	t.Parallel()
	got, err := Provider{}.Interpret(provider.StoredEvent{EventType: "customer.subscription.updated", ResourceType: "subscription", ResourceID: "sub_1",
		Payload: []byte(`{"data":{"object":{"id":"sub_1","status":"active"}}}`)}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.Plan{Fetch: true}, got, "Stripe sends no version: a hint")

	inv := `{"id":"in_1","subscription":"sub_1"}`
	got, err = Provider{}.Interpret(provider.StoredEvent{EventType: "invoice.paid", ResourceType: "subscription", ResourceID: "sub_1",
		Payload: []byte(`{"data":{"object":` + inv + `}}`)}, nil)
	require.NoError(t, err)
	require.Equal(t, provider.Plan{Fetch: true}, got, "the invoice_paid fact is declared (package fact), not coded here")
	require.Equal(t, "data.object", Provider{}.FactObject(provider.StoredEvent{}))

	_, err = Provider{}.Interpret(provider.StoredEvent{Payload: []byte(`{`)}, nil)
	require.ErrorIs(t, err, provider.ErrMalformed)
}
