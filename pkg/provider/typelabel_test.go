package provider_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// A metric's type label is a configured name: the allow-list entry that
// admits the type (a pattern for a pattern), else the provider's known
// entry, else "other". Fails if a type nobody configured becomes a label.
func TestTypeLabelIsAConfiguredNameOrOther(t *testing.T) {
	t.Parallel()
	known := []string{"push", "issues.*"}
	long := strings.Repeat("x", 480)
	for _, tc := range []struct {
		allow     []string
		eventType string
		want      string
	}{
		{nil, "push", "push"},
		{nil, "issues.opened", "issues.*"},
		{nil, long, provider.OtherEventType},
		{[]string{"invoice.*", "push"}, "invoice." + long, "invoice.*"},
		{[]string{"invoice.*"}, "push", provider.OtherEventType},
		{[]string{"*"}, long, "*"},
	} {
		require.Equal(t, tc.want, provider.TypeLabel(&provider.Endpoint{EventTypes: tc.allow}, known, tc.eventType), tc.eventType)
	}
	require.Equal(t, "push", provider.TypeLabel(nil, known, "push"), "an endpoint no longer configured")
}
