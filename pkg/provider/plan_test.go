package provider_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Every identity a plan read from a body is storable as a key: at most 512
// bytes, valid UTF-8, no NUL; anything else is malformed, so the event dies
// at once instead of failing its batch in the database on every retry.
func TestPlanIdentitiesAreBoundedLikeEventIDs(t *testing.T) {
	t.Parallel()
	ok := strings.Repeat("i", provider.MaxIdentityLen)
	require.NoError(t, provider.Plan{Facts: []provider.Fact{{Type: "invoice_paid", ID: ok}},
		Actions: []provider.Action{{Subject: ok, Kind: "receipt"}}}.Validate())
	for name, bad := range map[string]string{
		"too long":     ok + "i",
		"NUL":          "in_\x00",
		"invalid UTF8": "in_\xff",
	} {
		for what, plan := range map[string]provider.Plan{
			"fact id":        {Facts: []provider.Fact{{Type: "invoice_paid", ID: bad}}},
			"action subject": {Actions: []provider.Action{{Subject: bad, Kind: "receipt"}}},
		} {
			err := plan.Validate()
			require.ErrorIs(t, err, provider.ErrMalformed, "%s %s", what, name)
			require.Contains(t, err.Error(), what)
		}
	}
}
