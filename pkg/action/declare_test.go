package action_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookyard/hookyard/pkg/action"
)

// A transition's effect is keyed by the resource and the observation that
// caused it: the same version (or fetch) gives the same key, another one
// another key, and a resource id cannot pose as another resource's cause.
// Its body is encoded once, from identities and labels only.
func TestTransitionKeyNamesItsCauseAndBodyIsStable(t *testing.T) {
	t.Parallel()
	v3, v4 := int64(3), int64(4)
	k := action.Key{Provider: "chargebee", SourceAccount: "site", Environment: "test", Kind: "subscription_canceled"}
	a := action.TransitionRecord(k, "subscription", "sub_1", "active", "canceled", action.Cause{Version: &v3}, "ev_1", nil)
	b := action.TransitionRecord(k, "subscription", "sub_1", "active", "canceled", action.Cause{Version: &v3}, "ev_1", nil)
	c := action.TransitionRecord(k, "subscription", "sub_1", "active", "canceled", action.Cause{Version: &v4}, "ev_2", nil)
	f := action.TransitionRecord(k, "subscription", "sub_1", "active", "canceled", action.Cause{FetchSeq: 3}, "ev_3", nil)
	require.Equal(t, "subscription/sub_1@v3", a.SubjectID)
	require.Equal(t, a.Key.String(), b.Key.String())
	require.Equal(t, a.Body, b.Body)
	require.NotEqual(t, a.Key.String(), c.Key.String())
	require.NotEqual(t, a.Key.String(), f.Key.String(), "a fetch and a version never share a key")
	require.NotEqual(t, action.TransitionSubject("subscription", "a@v1", action.Cause{Version: &v3}),
		action.TransitionSubject("subscription", "a", action.Cause{Version: &v3}))
	var body action.TransitionBody
	require.NoError(t, json.Unmarshal(a.Body, &body))
	require.Equal(t, a.Key.String(), body.ActionKey)
	require.Equal(t, "canceled", body.To)
}

// A transition matches a change to its status, or a deletion, of its
// resource type, never a write that found the same state.
func TestTransitionMatchesOnlyAChange(t *testing.T) {
	t.Parallel()
	cancel := action.Transition{Type: "subscription", Field: "status", To: "canceled"}
	require.True(t, cancel.Matches("subscription", "active", "canceled"))
	require.True(t, cancel.Matches("subscription", "", "canceled"))
	require.False(t, cancel.Matches("subscription", "canceled", "canceled"))
	require.False(t, cancel.Matches("customer", "active", "canceled"))
	gone := action.Transition{Type: "customer", Deleted: true}
	require.True(t, gone.Matches("customer", "active", "deleted"))
	require.False(t, gone.Matches("customer", "deleted", "deleted"))
}

func TestEffectDeclarationErrorsNameTheEntry(t *testing.T) {
	t.Parallel()
	err := action.Effects{
		{Kind: "a"},
		{Kind: "a", OnFact: "x", On: &action.Transition{Type: "subscription", To: "canceled"}},
		{Kind: "b", On: &action.Transition{Field: "plan", To: "x", Deleted: true}, URL: "ftp://x"},
	}.Validate()
	require.ErrorContains(t, err, "effects.declare[0]: exactly one of on_fact and on is required")
	require.ErrorContains(t, err, "effects.declare[1]: kind a is declared twice")
	require.ErrorContains(t, err, "effects.declare[1]: exactly one of on_fact and on is required")
	require.ErrorContains(t, err, "effects.declare[2].on: type is required")
	require.ErrorContains(t, err, `effects.declare[2].on: field "plan": only status is read`)
	require.ErrorContains(t, err, "effects.declare[2].on: exactly one of to and deleted is required")
	require.ErrorContains(t, err, "effects.declare[2].url")
	require.Equal(t, "invoice_paid", action.Effects(nil).With(action.DefaultEffects).FactType(action.KindReceipt))
}
