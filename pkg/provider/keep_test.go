package provider_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/provider"
)

// Keep keeps exactly the named paths, through objects and arrays, with the
// provider's numbers as written, and the same bytes whatever the key order
// of the input. Fails if a field outside the paths survives, or if two
// orderings of one object keep different bytes (a versioned duplicate
// would then park as a conflict, a receipt change between attempts).
func TestKeepKeepsOnlyNamedPathsDeterministically(t *testing.T) {
	t.Parallel()
	fields := []string{"id", "status_transitions.paid_at", "items.data.current_period_end", "meta", "missing.deep"}
	a := `{"id":"in_1","email":"jane@example.com","status_transitions":{"paid_at":1700000000123456789,"voided_at":null},
		"items":{"object":"list","data":[{"current_period_end":17,"price":{"nickname":"x"}},"scalar"]},"meta":{"any":{"thing":1}}}`
	b := `{"meta":{"any":{"thing":1}},"items":{"data":[{"price":{"nickname":"x"},"current_period_end":17},"scalar"],"object":"list"},
		"status_transitions":{"voided_at":null,"paid_at":1700000000123456789},"email":"jane@example.com","id":"in_1"}`
	ka, err := provider.Keep([]byte(a), fields)
	require.NoError(t, err)
	kb, err := provider.Keep([]byte(b), fields)
	require.NoError(t, err)
	require.Equal(t, string(ka), string(kb))
	require.Equal(t, `{"id":"in_1","items":{"data":[{"current_period_end":17},{}]},"meta":{"any":{"thing":1}},`+
		`"status_transitions":{"paid_at":1700000000123456789}}`, string(ka))

	none, err := provider.Keep([]byte(a), nil)
	require.NoError(t, err)
	require.Equal(t, `{}`, string(none), "no declared field keeps nothing")
	scalar, err := provider.Keep([]byte(`"jane@example.com"`), fields)
	require.NoError(t, err)
	require.Equal(t, `{}`, string(scalar))
	_, err = provider.Keep([]byte(`{"id":`), fields)
	require.Error(t, err)
}
