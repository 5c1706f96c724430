package processor_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/projection"
	"github.com/hookyard/hookyard/pkg/provider/chargebee"
)

// Invariant 4 against a body two readers read differently: intake's
// encoding/json takes the last of "resource_version" and
// "Resource_version" (now, within version_skew), the stored jsonb keeps
// both and a second parse found 9e18, which pinned the projection: the
// real cancellation after it was stale and access stayed open. The body is
// kept dead at intake instead, and the cancellation applies.
func TestDuplicateKeyCannotPinAChargebeeProjectionEndToEnd(t *testing.T) {
	t.Parallel()
	p := scNew(t, pipelinetest.Options{})
	r := scCBRes("sub_pin")
	now := time.Now()
	forged := fmt.Sprintf(`{"id":"ev_pin_forged","event_type":"subscription_activated","occurred_at":%d,"content":{"subscription":`+
		`{"id":"sub_pin","status":"active","resource_version":9000000000000000000,"Resource_version":%d}}}`, now.Unix(), now.UnixMilli())
	h := http.Header{}
	h.Set(chargebee.AuthorizationHeader, chargebee.BasicAuth("u", "p"))
	code, resp := p.PostSigned(scCB, []byte(forged), h)
	require.Equal(t, http.StatusBadRequest, code, resp)
	require.Contains(t, resp, `"kept":true`)

	scPostCB(t, p, scCBEvent("ev_pin_cancel", "subscription_cancelled", r.ID, "cancelled", now.UnixMilli()+1000, now.Unix()))
	row := scWaitStatus(t, p, scCBKey("ev_pin_cancel"), inbox.StatusProcessed)
	require.Equal(t, projection.Applied, *row.Outcome)
	pr := scProjection(t, p, r)
	require.Equal(t, "cancelled", pr.Status)
	require.Equal(t, now.UnixMilli()+1000, *pr.Version)
}
