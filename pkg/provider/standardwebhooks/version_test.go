package standardwebhooks

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

func versioned(v string) string {
	return fmt.Sprintf(`{"type":"subscription.updated","data":{"id":"sub_v","version":%s,"status":"active"}}`, v)
}

// A projection only moves to greater versions, so one signed version of
// 2^63-1 would make every later update stale. A version that is not a
// time is refused (kept dead, returned) above 2^53, the largest integer a
// JSON sender can be relied on to write exactly (RFC 7493 section 2.2).
func TestStandardWebhooksVersionBeyondWhatASenderCanMeanIsKeptDead(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, v := range []string{"9223372036854775807", `"9223372036854775807"`, "9007199254740993"} {
		body := versioned(v)
		ev, err := Verifier{}.Verify(endpoint(), sign(t, secret, now, body), []byte(body), now)
		require.ErrorIs(t, err, provider.ErrVersionFromFuture, v)
		require.Equal(t, msgID, ev.ID, "returned to be kept under its identity")
		require.Equal(t, "sub_v", ev.ResourceID)
	}
	body := versioned("9007199254740992")
	_, err := Verifier{}.Verify(endpoint(), sign(t, secret, now, body), []byte(body), now)
	require.NoError(t, err)
}

// An endpoint whose versions are times in milliseconds
// (paths.version_is_time_ms) gets the endpoint's version_skew, as
// Chargebee's resource_version does.
func TestStandardWebhooksTimeVersionFromTheFutureIsRefused(t *testing.T) {
	t.Parallel()
	now := time.Now()
	ep := endpoint()
	ep.Paths.VersionIsTimeMs = true
	for _, tc := range []struct {
		ahead time.Duration
		skew  time.Duration
		ok    bool
	}{
		{23 * time.Hour, 0, true},
		{25 * time.Hour, 0, false},
		{2 * time.Minute, time.Minute, false},
	} {
		ep.VersionSkew = tc.skew
		body := versioned(fmt.Sprint(now.Add(tc.ahead).UnixMilli()))
		_, err := Verifier{}.Verify(ep, sign(t, secret, now, body), []byte(body), now)
		if tc.ok {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, provider.ErrVersionFromFuture, tc)
		}
	}
}
