package stripe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// A signed Stripe body with keys that readers can take for one ("livemode"
// twice, "Livemode" beside it) is kept dead as malformed, not read one way
// at intake and another later.
func TestStripeDeliveryWithDuplicateKeysIsMalformed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, body := range []string{
		`{"id":"evt_d","object":"event","type":"customer.subscription.updated","livemode":false,"Livemode":true,"data":{"object":{"id":"sub_1","object":"subscription"}}}`,
		`{"id":"evt_d","object":"event","type":"customer.subscription.updated","livemode":false,"data":{"object":{"id":"sub_1","id":"sub_2","object":"subscription"}}}`,
	} {
		_, err := Verifier{}.Verify(endpoint(), header(Sign([]byte(body), secret, now)), []byte(body), now)
		require.ErrorIs(t, err, provider.ErrMalformed, body)
	}
}
