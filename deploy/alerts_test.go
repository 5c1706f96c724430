package deploy

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
)

const alertsFile = "prometheus/alerts.yaml"

// operationsFile is the operator's manual; its "Runbooks" section holds a
// heading per alert.
const operationsFile = "../docs/operations.md"

// runbookURL is where each alert's runbook paragraph lives: a heading named
// after the alert in the operator's manual.
var runbookURL = regexp.MustCompile(`^https://github\.com/hookyard/hookyard/blob/main/docs/operations\.md#([a-z0-9-]+)$`)

func loadAlerts(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	// The parser `promtool check rules` runs: YAML schema, PromQL, label
	// names, annotation templates.
	groups, errs := rulefmt.ParseFile(alertsFile, false, model.UTF8Validation, parser.NewParser(parser.Options{}), promslog.NewNopLogger())
	require.Empty(t, errs)
	require.NotEmpty(t, groups.Groups)
	return groups
}

func TestAlertRulesPassThePrometheusRuleParser(t *testing.T) {
	t.Parallel()
	groups := loadAlerts(t)
	seen := map[string]bool{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "%s: only alerting rules here", g.Name)
			require.False(t, seen[r.Alert], "alert %s is defined twice", r.Alert)
			seen[r.Alert] = true
			require.Contains(t, []string{"critical", "warning"}, r.Labels["severity"], r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			require.NotEmpty(t, r.Annotations["description"], r.Alert)
			m := runbookURL.FindStringSubmatch(r.Annotations["runbook_url"])
			require.NotNil(t, m, "%s: runbook_url points at docs/operations.md", r.Alert)
			require.Equal(t, strings.ToLower(r.Alert), m[1], "%s: the anchor of its docs/operations.md heading", r.Alert)
		}
	}
}

func TestAlertRulesUseOnlyMetricsHookyardRegisters(t *testing.T) {
	t.Parallel()
	for _, g := range loadAlerts(t).Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, checkQuery(t, r.Alert, r.Expr), "%s uses a hookyard metric", r.Alert)
		}
	}
}

// TestEveryMetricWorthAnAlertHasAnAlert keeps the rules in step with the
// metrics docs/operations.md calls worth an alert.
func TestEveryMetricWorthAnAlertHasAnAlert(t *testing.T) {
	t.Parallel()
	used := map[string]bool{}
	for _, g := range loadAlerts(t).Groups {
		for _, r := range g.Rules {
			for _, m := range checkQuery(t, r.Alert, r.Expr) {
				used[strings.TrimSuffix(m, "_bucket")] = true
			}
		}
	}
	for _, m := range []string{
		"hookyard_outbox_oldest_age_seconds", "hookyard_outbox_publish_failures_total", "hookyard_outbox_dead_total",
		"hookyard_outbox_backlog_up", "hookyard_db_gauges_up", "hookyard_inbox_oldest_pending_age_seconds",
		"hookyard_processor_receive_to_apply_seconds", "hookyard_processor_failures_total", "hookyard_processor_consumer_lag",
		"hookyard_reconciler_divergences_total", "hookyard_actions_open", "hookyard_receiver_rejected_total",
		"hookyard_processor_partition_count_changed", "hookyard_outbox_partition_count_changed",
	} {
		require.True(t, used[m], "no alert uses %s", m)
	}
}

// Every alert's runbook link lands on a docs/operations.md heading of that
// name, with a paragraph under it: an alert at 3 a.m. must open a page that
// says what it means and the first command to run.
func TestEveryAlertHasARunbookInOperations(t *testing.T) {
	t.Parallel()
	ops, err := os.ReadFile(operationsFile)
	require.NoError(t, err)
	for _, g := range loadAlerts(t).Groups {
		for _, r := range g.Rules {
			heading := "\n#### " + r.Alert + "\n"
			i := strings.Index(string(ops), heading)
			require.GreaterOrEqual(t, i, 0, "docs/operations.md has no runbook heading for %s", r.Alert)
			body := string(ops[i+len(heading):])
			require.Contains(t, body[:min(len(body), 1200)], "First:", "%s: the runbook names the first command to run", r.Alert)
		}
	}
}
