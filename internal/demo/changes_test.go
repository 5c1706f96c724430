package demo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/hookyard/hookyard/internal/testkit/pipelinetest"
	"github.com/hookyard/hookyard/pkg/action"
	"github.com/hookyard/hookyard/pkg/fact"
	"github.com/hookyard/hookyard/pkg/message"
	"github.com/hookyard/hookyard/pkg/provider/stripe/stripesim"
	"github.com/hookyard/hookyard/processor"
)

// changesDemoConfig is the configuration the changes demo runs, printed as
// it is: three projected Stripe types, two declared facts, two declared
// effects (the same keys as hookyard.example.yaml).
const changesDemoConfig = `endpoints:
  - id: stripe-test
    provider: stripe
    project: [subscription, customer, invoice]
facts:
  - provider: stripe
    type: invoice_paid
    on: [invoice.paid]
    object: data.object
    id: id
    fields: [id, status, amount_paid, currency, customer]
  - provider: stripe
    type: charge_refunded
    on: [charge.refunded]
    object: data.object
    id: id
    resource: {type: invoice, id: invoice}
    fields: [id, amount_refunded, currency, invoice]
effects:
  declare:
    - kind: receipt
      on_fact: invoice_paid
    - kind: subscription_canceled
      on: {type: subscription, field: status, to: canceled}
projection:
  state_fields: [metadata.tier, amount_paid]
`

// ChangesDemoOutEnv names the file the changes demo writes its story to
// (docs/changes-demo.md: `make changes-demo`); unset, it only logs it.
const changesDemoOutEnv = "HOOKYARD_CHANGES_DEMO_OUT"

// The changes demo: a small Stripe story (a customer, its subscription,
// an invoice created, finalized and paid, a refunded charge, the
// subscription canceled) through the whole pipeline with the configuration
// above. Every projection change is on the changes topic under its
// resource's key, in write order, and the declared facts and effects are
// recorded once each: the receipt on the paid invoice, the cancellation
// effect on the subscription's transition. Fails if a type is not
// projected, if a change record is missing or out of order, or if a
// declared fact or effect is not recorded.
func TestChangesDemoThreeTypesTwoFactsTwoEffects(t *testing.T) {
	t.Parallel()
	var cfg struct {
		Endpoints []struct {
			Project []string `yaml:"project"`
		} `yaml:"endpoints"`
		Facts   fact.Declarations `yaml:"facts"`
		Effects struct {
			Declare action.Effects `yaml:"declare"`
		} `yaml:"effects"`
		Projection struct {
			StateFields []string `yaml:"state_fields"`
		} `yaml:"projection"`
	}
	require.NoError(t, yaml.Unmarshal([]byte(changesDemoConfig), &cfg))
	p := pipelinetest.New(t, pipelinetest.Options{StripeProject: cfg.Endpoints[0].Project,
		Processor: func(c *processor.Config) {
			c.Facts, c.Effects, c.StateFields = cfg.Facts, cfg.Effects.Declare, cfg.Projection.StateFields
		}})
	ctx := context.Background()

	var story []string
	send := func(typ string, obj any) {
		t.Helper()
		id, code, err := p.Sim.Send(ctx, typ, obj)
		require.NoError(t, err)
		require.Equal(t, 200, code)
		story = append(story, fmt.Sprintf("%s %s", id, typ))
		p.WaitIdle()
	}
	cus := map[string]any{"id": "cus_demo", "metadata": map[string]any{"tier": "pro"}}
	p.Sim.PutObject("customer", cus)
	send("customer.created", map[string]any{"id": "cus_demo", "object": "customer"})

	sub := stripesim.Subscription{ID: "sub_demo", Customer: "cus_demo", Status: "active",
		CurrentPeriodEnd: time.Now().Add(30 * 24 * time.Hour).Unix()}
	p.Sim.Put(sub)
	sub, _ = p.Sim.Get(sub.ID)
	send("customer.subscription.created", sub)

	inv := func(status string, paid int64) map[string]any {
		return map[string]any{"id": "in_demo", "object": "invoice", "customer": "cus_demo", "status": status,
			"amount_paid": paid, "currency": "eur",
			"parent": map[string]any{"subscription_details": map[string]any{"subscription": "sub_demo"}}}
	}
	for _, e := range []struct {
		typ, status string
		paid        int64
	}{{"invoice.created", "draft", 0}, {"invoice.finalized", "open", 0}, {"invoice.paid", "paid", 900}} {
		p.Sim.PutObject("invoice", inv(e.status, e.paid))
		send(e.typ, inv(e.status, e.paid))
	}
	send("charge.refunded", map[string]any{"id": "ch_demo", "object": "charge", "amount_refunded": 900, "currency": "eur", "invoice": "in_demo"})

	sub.Status, sub.CanceledAt = "canceled", time.Now().Unix()
	p.Sim.Put(sub)
	send("customer.subscription.deleted", sub)
	p.Eventually(func() bool {
		pr, ok := p.Projection(pipelinetest.Resource("sub_demo"))
		return ok && pr.Status == "canceled"
	}, "canceled")
	p.WaitIdle()

	recs := readChanges(t, p)
	acts, err := action.List(ctx, p.Pool, action.Filter{Status: action.StatusPending})
	require.NoError(t, err)
	var facts []string
	rows, err := p.Pool.Query(ctx, `SELECT fact_type, fact_id, resource_type, resource_id, data::text FROM fact ORDER BY recorded_at, fact_type`)
	require.NoError(t, err)
	for rows.Next() {
		var typ, id, rt, rid, data string
		require.NoError(t, rows.Scan(&typ, &id, &rt, &rid, &data))
		facts = append(facts, fmt.Sprintf("%-16s %-8s about %s %s  %s", typ, id, rt, rid, data))
	}
	require.NoError(t, rows.Err())

	var history []string
	rows, err = p.Pool.Query(ctx, `SELECT coalesce(event_id, ''), outcome, coalesce(status, ''), coalesce(detail, '') FROM projection_history
WHERE resource_type = 'subscription' AND resource_id = 'sub_demo' ORDER BY id`)
	require.NoError(t, err)
	refreshes := 0
	for rows.Next() {
		var ev, outcome, status, detail string
		require.NoError(t, rows.Scan(&ev, &outcome, &status, &detail))
		history = append(history, strings.TrimSpace(fmt.Sprintf("%-30s %-8s %-9s %s", ev, outcome, status, detail)))
		if strings.Contains(ev, "evt_") && outcome == "fetched" {
			refreshes++
		}
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, refreshes, 5, "the subscription's two events and the three invoice events' refreshes")

	// What the demo claims.
	keys := map[string][]message.Change{}
	for _, c := range recs {
		keys[c.Resource.Type] = append(keys[c.Resource.Type], c)
	}
	require.NotEmpty(t, keys["customer"])
	require.NotEmpty(t, keys["subscription"])
	require.NotEmpty(t, keys["invoice"])
	last := func(typ string) message.Change { l := keys[typ]; return l[len(l)-1] }
	require.Equal(t, "paid", last("invoice").Status)
	require.Equal(t, "canceled", last("subscription").Status)
	require.Len(t, facts, 2)
	kinds := map[string]string{}
	for _, a := range acts {
		kinds[a.Kind] = a.SubjectID
	}
	require.Equal(t, "in_demo", kinds["receipt"])
	require.Contains(t, kinds["subscription_canceled"], "sub_demo")

	var out bytes.Buffer
	fmt.Fprintf(&out, "# The changes demo\n\nGenerated by `make changes-demo` (`%s=docs/changes-demo.md go test ./internal/demo -run TestChangesDemo -count=1`,\n", changesDemoOutEnv)
	fmt.Fprintf(&out, "with Postgres at `TEST_DATABASE_URL` and an in-process Kafka): the whole pipeline (receiver, inbox,\noutbox relay, Kafka, processor) with the Stripe simulator. Times, fetch numbers and event ids\nchange from run to run.\n\n")
	fmt.Fprintf(&out, "## The configuration\n\n```yaml\n%s```\n\n", changesDemoConfig)
	fmt.Fprintf(&out, "## The story (each webhook signed and sent by the simulator, in this order)\n\n```\n%s\n```\n\n", strings.Join(story, "\n"))
	fmt.Fprintf(&out, "## The change records (`hookyard.changes`, read from the beginning; per key in write order)\n\n")
	fmt.Fprintf(&out, "Keys are provider/account/environment/type/id. An invoice event of a subscription is the invoice's;\nthe subscription is refreshed by a check on its own key (its `event_id` names the invoice event).\n\n```\n")
	for _, c := range recs {
		fmt.Fprintf(&out, "%s\n  decision=%s event_id=%s fence=%d fetch_seq=%s status=%q deleted=%t\n  state=%s\n",
			c.Resource.Key(), c.Decision, c.EventID, c.FenceGeneration, seq(c.FetchSeq), c.Status, c.Deleted, compact(c.State))
	}
	fmt.Fprintf(&out, "```\n\nThe subscription's history (`projection_history`): its own two events, and a refresh check after each\ninvoice event, fetched on its own key; a refresh that found the state unchanged wrote no change record\n(hence the fetch numbers missing above).\n\n```\n%s\n", strings.Join(history, "\n"))
	fmt.Fprintf(&out, "```\n\n## The facts (table `fact`)\n\n```\n%s\n```\n\n", strings.Join(facts, "\n"))
	fmt.Fprintf(&out, "## The actions (table `action`; no URL is configured, so they wait as pending)\n\n```\n")
	for _, a := range acts {
		fmt.Fprintf(&out, "%-22s idempotency_key=%s status=%s event_id=%s\n", a.Kind, a.IdempotencyKey, a.Status, a.EventID)
	}
	fmt.Fprintf(&out, "```\n")
	t.Log("\n" + out.String())
	if path := os.Getenv(changesDemoOutEnv); path != "" {
		require.NoError(t, os.WriteFile(path, out.Bytes(), 0o644))
	}
}

func seq(v *int64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// readChanges reads the whole changes topic from the beginning, once the
// outbox is empty (every record acknowledged), partition by partition.
func readChanges(t *testing.T, p *pipelinetest.Pipeline) []message.Change {
	t.Helper()
	var out []message.Change
	for _, r := range p.ChangeRecords(t) {
		c, err := message.DecodeChange(r.Value)
		require.NoError(t, err)
		require.Equal(t, c.Resource.Key(), string(r.Key))
		out = append(out, c)
	}
	// In the order they were written (changed_at), which per key is the
	// topic's order.
	slices.SortStableFunc(out, func(a, b message.Change) int { return a.ChangedAt.Compare(b.ChangedAt) })
	return out
}
