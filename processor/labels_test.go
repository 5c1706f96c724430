package processor_test

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/internal/testkit/promread"
	"github.com/hookyard/hookyard/pkg/inbox"
	"github.com/hookyard/hookyard/pkg/provider"
	"github.com/hookyard/hookyard/processor"
)

// A sender chooses its event types; a metric label must not let it choose
// the number of series. Failures of events whose type no allow-list entry
// and no known type of the provider names are counted under "other": three
// distinct 480-byte types make one series, not three that live until
// restart.
func TestFailureLabelsCarryOnlyConfiguredEventTypes(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	p := scNew(t, pipelinetest.Options{Processor: func(c *processor.Config) { c.Registerer = reg; c.MaxAttempts = 1 }})
	const name = "hookyard_processor_failures_total"
	for i, c := range []string{"a", "b", "c"} {
		typ := "customer.subscription." + strings.Repeat(c, 458)
		id := scSend(t, p, typ, scSub("sub_lbl_"+c, "active")) // unknown to the simulator: the fetch fails
		scWaitStatus(t, p, scStripeKey(id), inbox.StatusDead)
		p.Eventually(func() bool { return failureCount(t, reg, name) >= float64(i+1) }, "the failure was counted")
	}
	require.Equal(t, 1, testutil.CollectAndCount(reg, name), "one series for every unconfigured type")
	require.NotNil(t, metric(t, reg, name, map[string]string{"provider": provider.Stripe, "type": "other"}))
}

// failureCount sums every series of name.
func failureCount(t *testing.T, reg *prometheus.Registry, name string) float64 {
	ms, _, err := promread.Series(reg, name, nil)
	require.NoError(t, err)
	var n float64
	for _, m := range ms {
		n += m.GetCounter().GetValue()
	}
	return n
}
