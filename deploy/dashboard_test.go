package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const dashboardFile = "grafana/hookyard.json"

type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		Expr       string `json:"expr"`
		RefID      string `json:"refId"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	require.NoError(t, dec.Decode(&d))
	return d
}

// grafanaVars are the dashboard's variables, replaced by something PromQL
// parses before a query is checked.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$namespace", ".*")

func TestDashboardIsAGrafanaDashboardOnAPrometheusDatasourceVariable(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	require.NotEmpty(t, d.UID)
	require.NotEmpty(t, d.Title)
	require.GreaterOrEqual(t, d.SchemaVersion, 36, "datasource references by uid need schema 36 or later")
	var ds bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" {
			ds = true
			require.Equal(t, "datasource", v.Type)
			require.JSONEq(t, `"prometheus"`, string(v.Query))
		}
	}
	require.True(t, ds, "a datasource variable lets every Grafana pick its own Prometheus")
	ids := map[int]bool{}
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "panel id %d is used twice", p.ID)
		ids[p.ID] = true
		require.Positive(t, p.GridPos.W, p.Title)
		require.Positive(t, p.GridPos.H, p.Title)
		require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, p.Title)
		if p.Type == "row" {
			continue
		}
		require.NotNil(t, p.Datasource, p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, p.Title)
		require.NotEmpty(t, p.Targets, p.Title)
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			require.Equal(t, "${datasource}", tg.Datasource.UID, p.Title)
			require.False(t, refs[tg.RefID], "%s: refId %s twice", p.Title, tg.RefID)
			refs[tg.RefID] = true
		}
	}
}

func TestDashboardQueriesUseOnlyMetricsHookyardRegisters(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			checkQuery(t, p.Title, grafanaVars.Replace(tg.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		require.NotNil(t, m, "variable %s", v.Name)
		checkQuery(t, "variable "+v.Name, m[1])
	}
}

// TestDashboardShowsWhatAnOperatorLooksFor holds the dashboard to its list:
// intake and refusals, outbox backlog and age, lag per partition,
// receive-to-apply latency, retries and dead events, reconciler divergences,
// open and dead actions, fence takes.
func TestDashboardShowsWhatAnOperatorLooksFor(t *testing.T) {
	t.Parallel()
	d := loadDashboard(t)
	shown := map[string]string{} // metric -> a panel showing it
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range checkQuery(t, p.Title, grafanaVars.Replace(tg.Expr)) {
				shown[strings.TrimSuffix(m, "_bucket")] = p.Title
			}
		}
	}
	for item, metrics := range map[string][]string{
		"intake rate":                {"hookyard_receiver_events_total"},
		"refusals by reason":         {"hookyard_receiver_rejected_total"},
		"outbox backlog and age":     {"hookyard_outbox_backlog_rows", "hookyard_outbox_oldest_age_seconds"},
		"consumer lag per partition": {"hookyard_processor_consumer_lag"},
		"receive-to-apply latency":   {"hookyard_processor_receive_to_apply_seconds"},
		"retries and dead events":    {"hookyard_processor_retries_enqueued_total", "hookyard_processor_events_total", "hookyard_inbox_events"},
		"reconciler divergences":     {"hookyard_reconciler_divergences_total"},
		"open and dead actions":      {"hookyard_actions_open"},
		"fence takes":                {"hookyard_processor_fence_takes_total"},
	} {
		for _, m := range metrics {
			require.Contains(t, shown, m, "no panel shows %s (%s)", m, item)
		}
	}
	// Lag is per partition, not summed over the group.
	require.Contains(t, exprOf(d, "hookyard_processor_consumer_lag"), "by (partition)")
	// Refusals are split by reason.
	require.Contains(t, exprOf(d, "hookyard_receiver_rejected_total"), "by (reason)")
}

func exprOf(d dashboard, metric string) string {
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, metric) {
				return tg.Expr
			}
		}
	}
	return ""
}
