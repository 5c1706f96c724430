package standardwebhooks

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// A signed Standard Webhooks body with keys readers can take for one is
// kept dead as malformed: the version checked at intake and the one a
// later reading finds could differ.
func TestStandardWebhooksDeliveryWithDuplicateKeysIsMalformed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	body := `{"type":"subscription.updated","data":{"id":"sub_1","version":1,"Version":2,"status":"active"}}`
	_, err := Verifier{}.Verify(endpoint(), sign(t, secret, now, body), []byte(body), now)
	require.ErrorIs(t, err, provider.ErrMalformed)
}
