package standardwebhooks

import (
	"encoding/base64"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Checking a delivery's signature holds no copy of its body: the v1 signature is an
// HMAC streamed over the id, the timestamp and the body as received. The
// reference library formats "id.timestamp.body" into a string and then into
// bytes, two copies per secret, which for a large body is what a receiver's
// memory is spent on. Fails if verification copies the body again. Not
// parallel: it reads the process's allocation counter.
func TestVerifyHoldsNoCopyOfTheBody(t *testing.T) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("copies-test-key-0123456789abcdef"))
	body := []byte(`{"type":"subscription.updated","data":{"id":"sub_1","pad":"` + strings.Repeat("x", 4<<20) + `"}}`)
	now := time.Now()
	h, err := Sign(secret, "msg_copies", now, body)
	require.NoError(t, err)
	// Two secrets, as during a rotation: the first does not match.
	ep := &provider.Endpoint{ID: "sw", Provider: provider.StandardWebhooks, SourceAccount: "a", Environment: "test",
		Secrets: []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("another-key-0123456789abcdef-xy")), secret}}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err = verify(ep, h, body, now)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	// The signature check alone: what reading the event then decodes is
	// the document's own fields.
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(len(body)), "bytes allocated to verify a %d-byte body", len(body))
}
