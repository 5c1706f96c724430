package subscriber_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/subscriber"
)

// A key the official library cannot sign with, or one too short, is
// refused when the subscriber is configured, naming the entry and the
// variable but never the key. Fails if CheckSecret lets a bad key through
// to fail every delivery instead.
func TestUnusableSubscriberKeyIsRefusedAtStart(t *testing.T) {
	t.Parallel()
	good := newSecret(t)
	for name, secret := range map[string]string{
		"unset":      "",
		"no prefix":  good[len("whsec_"):],
		"not base64": "whsec_!!!not-base64!!!",
		"unpadded":   strings.TrimRight(good, "="),
		"too short":  "whsec_c2hvcnQta2V5",
		"public key": "whpk_" + good[len("whsec_"):],
	} {
		err := subscriber.Subscribers{{Name: "billing", URL: "https://billing.internal/changes", SecretEnv: "BILLING_SECRET", Secret: secret}}.Validate(true)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "changes.subscribers[0] (billing): secret from BILLING_SECRET", name)
		if secret != "" {
			require.NotContains(t, err.Error(), secret, name)
		}
	}
	require.NoError(t, subscriber.Subscribers{{Name: "billing", URL: "https://billing.internal/changes", SecretEnv: "S", Secret: good}}.Validate(true))
	err := subscriber.Subscribers{{Name: "a b", URL: "ftp://x", SecretEnv: "S", Secret: good}, {Name: "c", SecretEnv: "S", Secret: good},
		{Name: "c", URL: "https://x", Secret: good}}.Validate(true)
	require.ErrorContains(t, err, `changes.subscribers[0]: name "a b"`)
	require.ErrorContains(t, err, "changes.subscribers[0] (a b).url")
	require.ErrorContains(t, err, "changes.subscribers[1] (c): url")
	require.ErrorContains(t, err, "changes.subscribers[2]: name c is declared twice")
	require.ErrorContains(t, err, "changes.subscribers[2] (c): secret_env is required")
}

// Each observation of a resource is its own subject, and every record of
// one observation (a redelivery, a republish) names the same one: a
// versioned write, a fetched one, a versioned resource's reconciled fetch,
// and a resource id holding "@" cannot pass for another resource's.
func TestChangeSubjectsNameTheObservation(t *testing.T) {
	t.Parallel()
	v, f := int64(7), int64(3)
	at := time.Unix(1700000000, 5).UTC()
	c := message.Change{Resource: message.Resource{Provider: "stripe", SourceAccount: "acct", Environment: "test", Type: "subscription", ID: "sub_1"}}
	versioned, fetched, both, old := c, c, c, c
	versioned.Version = &v
	fetched.FetchSeq = &f
	both.Version, both.FetchSeq = &v, &f
	old.FetchedAt = &at
	require.Equal(t, "subscription/sub_1@v7", subscriber.Subject(versioned))
	require.Equal(t, "subscription/sub_1@f3", subscriber.Subject(fetched))
	require.Equal(t, "subscription/sub_1@v7f3", subscriber.Subject(both))
	require.Equal(t, "subscription/sub_1@t1700000000000000005", subscriber.Subject(old))
	republished := versioned
	republished.Decision = message.DecisionCurrent
	require.Equal(t, subscriber.Subject(versioned), subscriber.Subject(republished))
	require.Equal(t, "subscription/sub_1", subscriber.OrderKey(versioned))
}
