package stripesim_test

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider/stripe"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
)

// The customers and invoices lists answer as Stripe's do, the inconvenient
// parts first: a deleted customer is left out of GET /v1/customers (it is
// still retrievable one by one), invoices of every status are listed,
// both newest first, paged with starting_after and has_more through the
// Stripe client, and a cursor the list does not hold is resource_missing.
// Fails if the simulator lists deleted customers or filters invoices.
func TestCustomerAndInvoiceListsAnswerAsStripeDoes(t *testing.T) {
	t.Parallel()
	sim := stripesim.New(stripesim.Config{})
	srv := httptest.NewServer(sim)
	t.Cleanup(srv.Close)
	cl := stripe.NewClient(stripe.APIConfig{BaseURL: srv.URL, APIKey: stripesim.DevAPIKey}, nil)
	var cus []string
	for i := range 3 {
		cus = append(cus, sim.PutObject("customer", map[string]any{"created": 1000 + i}))
	}
	require.True(t, sim.DeleteCustomer(cus[1]))
	for i, st := range []string{"draft", "open", "paid", "void", "uncollectible"} {
		sim.PutObject("invoice", map[string]any{"status": st, "created": 2000 + i})
	}

	page, more, err := cl.ListObjects(t.Context(), "", "customer", "", 1)
	require.NoError(t, err)
	require.True(t, more)
	require.Equal(t, cus[2], page[0].ID, "newest first")
	page, more, err = cl.ListObjects(t.Context(), "", "customer", page[0].ID, 1)
	require.NoError(t, err)
	require.False(t, more)
	require.Equal(t, cus[0], page[0].ID, "the deleted customer is not listed")
	_, _, err = cl.ListObjects(t.Context(), "", "customer", cus[1], 1)
	require.Equal(t, "resource_missing", stripe.ErrorCode(err))

	invs, more, err := cl.ListObjects(t.Context(), "", "invoice", "", 100)
	require.NoError(t, err)
	require.False(t, more)
	var statuses []string
	for _, in := range invs {
		statuses = append(statuses, in.Status)
	}
	require.Equal(t, []string{"uncollectible", "void", "paid", "open", "draft"}, statuses)
}
