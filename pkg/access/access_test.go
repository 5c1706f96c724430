package access_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/access"
	"github.com/hookyard/hookyard/pkg/projection"
)

// Invariant 11: access is a product decision on top of the projection.
// Immediate cancellation ends access now; cancel-at-period-end ends it at the
// period's end; past_due and unpaid follow the policy. Each row fails if the
// matching branch of Decide is removed or changed (e.g. treating
// cancel_at_period_end as canceled now, or ignoring the items' period end).
func TestDecideAccessFollowsStatusPolicyAndPeriodEnd(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	before := now.Add(-24 * time.Hour).Unix()
	after := now.Add(24 * time.Hour).Unix()
	yes, no := true, false

	type want struct {
		access bool
		reason string
		until  *int64
	}
	tests := []struct {
		name    string
		status  string
		deleted bool
		state   string
		policy  access.Policy
		want    want
	}{
		{name: "active grants", status: "active", want: want{true, "active", nil}},
		{name: "trialing grants", status: "trialing", want: want{true, "trialing", nil}},
		{name: "chargebee in_trial grants", status: "in_trial", want: want{true, "in_trial", nil}},
		{name: "status read from state when the column is empty", status: "", state: `{"status":"active"}`,
			want: want{true, "active", nil}},
		{name: "canceled denies at once", status: "canceled", state: fmt.Sprintf(`{"current_period_end":%d}`, after),
			want: want{false, "canceled", nil}},
		{name: "chargebee cancelled denies at once", status: "cancelled", want: want{false, "canceled", nil}},
		{name: "cancel_at_period_end before the end grants until the end (top-level period end)", status: "active",
			state: fmt.Sprintf(`{"cancel_at_period_end":true,"current_period_end":%d}`, after),
			want:  want{true, "cancel_at_period_end", &after}},
		{name: "cancel_at_period_end after the end denies (top-level period end)", status: "active",
			state: fmt.Sprintf(`{"cancel_at_period_end":true,"current_period_end":%d}`, before),
			want:  want{false, "period_ended", &before}},
		{name: "cancel_at_period_end before the end grants (items period end, basil API)", status: "active",
			state: fmt.Sprintf(`{"cancel_at_period_end":true,"items":{"data":[{"current_period_end":%d}]}}`, after),
			want:  want{true, "cancel_at_period_end", &after}},
		{name: "cancel_at_period_end after the end denies (items period end, basil API)", status: "active",
			state: fmt.Sprintf(`{"cancel_at_period_end":true,"items":{"data":[{"current_period_end":%d}]}}`, before),
			want:  want{false, "period_ended", &before}},
		{name: "chargebee non_renewing before current_term_end grants", status: "non_renewing",
			state: fmt.Sprintf(`{"current_term_end":%d}`, after), want: want{true, "cancel_at_period_end", &after}},
		{name: "chargebee non_renewing after current_term_end denies", status: "non_renewing",
			state: fmt.Sprintf(`{"current_term_end":%d}`, before), want: want{false, "period_ended", &before}},
		{name: "past_due grants by default", status: "past_due", want: want{true, "past_due", nil}},
		{name: "past_due denies when the policy says so", status: "past_due", policy: access.Policy{PastDue: &no},
			want: want{false, "past_due", nil}},
		{name: "unpaid denies by default", status: "unpaid", want: want{false, "unpaid", nil}},
		{name: "unpaid grants when the policy says so", status: "unpaid", policy: access.Policy{Unpaid: &yes},
			want: want{true, "unpaid", nil}},
		{name: "deleted denies whatever the status", status: "active", deleted: true, want: want{false, "deleted", nil}},
		{name: "incomplete denies", status: "incomplete", want: want{false, "incomplete", nil}},
		{name: "paused denies", status: "paused", want: want{false, "paused", nil}},
		{name: "unknown status denies", status: "", state: `{}`, want: want{false, "unknown_status", nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := int64(7)
			state := tt.state
			if state == "" {
				state = `{}`
			}
			p := projection.Projection{Status: tt.status, Deleted: tt.deleted, State: []byte(state), Version: &v, ObservedAt: now}
			d := access.Decide(p, tt.policy, now)
			require.Equal(t, tt.want.access, d.Access, "access: %+v", d)
			require.Equal(t, tt.want.reason, d.Reason)
			require.Equal(t, &v, d.ProviderVersion)
			if tt.want.until == nil {
				require.Nil(t, d.Until)
			} else {
				require.NotNil(t, d.Until)
				require.Equal(t, *tt.want.until, d.Until.Unix())
			}
		})
	}
}

// A subscription set to cancel at its period's end whose projection knows
// no period end (a hint fetched without it, an older API shape) keeps
// access, since the provider still calls it active and the customer paid
// for the period, until the provider reports the cancellation, which it
// does when the period ends. The decision says so: reason
// cancel_at_period_end and no until, so a product can tell it apart from a
// renewing subscription. Fails if such a subscription reads as plainly
// active or non_renewing, or loses access with no end known.
func TestCancelAtPeriodEndWithNoKnownEndKeepsAccessAndSaysSo(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, p := range []projection.Projection{
		{Status: "active", State: []byte(`{"cancel_at_period_end":true}`)},
		{Status: "trialing", State: []byte(`{"cancel_at_period_end":true,"current_period_end":null}`)},
		{Status: "non_renewing", State: []byte(`{}`)},
	} {
		d := access.Decide(p, access.Policy{}, now)
		require.True(t, d.Access, "%s %s", p.Status, p.State)
		require.Equal(t, "cancel_at_period_end", d.Reason, "%s %s", p.Status, p.State)
		require.Nil(t, d.Until, "%s %s", p.Status, p.State)
	}
}
