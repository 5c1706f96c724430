package chargebee

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// encoding/json reads the LAST of keys that differ only in case and
// Postgres jsonb keeps "Resource_version" apart from "resource_version":
// intake would check one version and the processor apply another, 9e18,
// after which every real update is stale. Such a body is kept dead as
// malformed; so is an exact duplicate, whichever reader keeps which.
func TestDuplicateKeyCannotPinAChargebeeProjection(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1700000000123)
	for _, content := range []string{
		`{"subscription":{"id":"sub_p","status":"active","resource_version":9000000000000000000,"Resource_version":%d}}`,
		`{"subscription":{"id":"sub_p","status":"active","resource_version":9000000000000000000,"resource_version":%d}}`,
		`{"subscription":{"id":"sub_p","status":"active","resource_version":%d,"Status":"cancelled"}}`,
	} {
		body := fmt.Sprintf(`{"id":"ev_p","event_type":"subscription_changed","content":`+content+`}`, now.UnixMilli())
		_, err := Verifier{}.Verify(endpoint(), auth(BasicAuth(user, pass)), []byte(body), now)
		require.ErrorIs(t, err, provider.ErrMalformed, body)
		_, err = Verifier{}.Identify(endpoint(), []byte(body), now)
		require.ErrorIs(t, err, provider.ErrMalformed, "the events scan reads identity the same way: %s", body)
	}
}

// The processor applies the version intake checked against version_skew
// (the inbox row's), never one it reads again from the payload.
func TestInterpretTakesTheVersionIntakeChecked(t *testing.T) {
	t.Parallel()
	checked := int64(1700000000123)
	sub := `{"id":"sub_1","status":"active","resource_version":9000000000000000000}`
	got, err := Provider{}.Interpret(provider.StoredEvent{EventType: "subscription_changed", ResourceType: "subscription",
		ResourceID: "sub_1", Version: &checked, Payload: []byte(`{"content":{"subscription":` + sub + `}}`)}, nil)
	require.NoError(t, err)
	require.Equal(t, checked, got.Snapshot.Version)
}

// An invoice event is keyed by its subscription; when it carries that
// subscription's object, the snapshot's version is checked at intake like
// any other (it was applied unchecked before).
func TestInvoiceEventsSubscriptionVersionIsCheckedAtIntake(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1700000000123)
	body := `{"id":"ev_i","event_type":"invoice_generated","content":{"invoice":{"id":"inv_1","subscription_id":"sub_i","status":"paid"},
"subscription":{"id":"sub_i","status":"active","resource_version":9000000000000000000}}}`
	ev, err := Verifier{}.Verify(endpoint(), auth(BasicAuth(user, pass)), []byte(body), now)
	require.ErrorIs(t, err, provider.ErrVersionFromFuture)
	require.Equal(t, "sub_i", ev.ResourceID)
}
