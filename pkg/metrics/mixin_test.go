package metrics

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"gopkg.in/yaml.v3"
)

// The mixin's files (examples/monitoring).
const (
	alertsFile    = "../../examples/monitoring/nico-alerts.yaml"
	dashboardFile = "../../examples/monitoring/nico-dashboard.json"
)

// ruleFile is Prometheus' rule file format, decoded strictly: an unknown
// field is an error, as Prometheus itself refuses it.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Record      string            `yaml:"record"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title  string `json:"title"`
	UID    string `json:"uid"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars are the dashboard's Grafana variables, replaced before the
// expressions are parsed as PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h")

// exported is every metric name the two programs' registries export, with
// a histogram's _bucket, _sum and _count series.
func exported(t *testing.T) []string {
	a, c := programs()
	var out []string
	for _, n := range append(a.Names(), c.Names()...) {
		out = append(out, n, n+"_bucket", n+"_sum", n+"_count")
	}
	return out
}

// metricNames parses expr with Prometheus' PromQL parser and returns the
// metric names its selectors name.
func metricNames(t *testing.T, where, expr string) []string {
	t.Helper()
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		t.Errorf("%s: %q does not parse: %v", where, expr, err)
		return nil
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				t.Errorf("%s: selector %s names no metric", where, vs)
			}
			names = append(names, vs.Name)
		}
		return nil
	})
	return names
}

// TestAlertRules: the rule file decodes strictly as Prometheus' format,
// every rule is an alert with a valid name, duration, severity and
// summary, every expression parses with Prometheus' own PromQL parser, and
// every metric it names is exported by the agent or the coordinator; the
// alerts the mixin promises are there.
func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	var f ruleFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	have := exported(t)
	var alerts []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			where := alertsFile + ": " + r.Alert
			if r.Alert == "" || !model.UTF8Validation.IsValidMetricName(r.Alert) || r.Record != "" {
				t.Errorf("%s: want an alert rule with a valid name", where)
			}
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
			}
			if r.Labels["severity"] != "critical" && r.Labels["severity"] != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", where, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", where)
			}
			for _, n := range metricNames(t, where, r.Expr) {
				if !slices.Contains(have, n) {
					t.Errorf("%s: names %s, which neither program exports", where, n)
				}
			}
			alerts = append(alerts, r.Alert)
		}
	}
	for _, want := range []string{"NicoNoCoordinatorLeader", "NicoEtcdInsufficientMembers", "NicoMembershipOperationStuck", "NicoRolloutHalted",
		"NicoGenerationRolledBack", "NicoLearnerStalled", "NicoVoterNodeDead", "NicoCertificateExpiring",
		"NicoEtcdNoSpace", "NicoEtcdDatabaseNearQuota", "NicoEtcdDataDirFull", "NicoEtcdDataDirLowSpace"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("no alert %s", want)
		}
	}
}

// TestDashboard: the Grafana dashboard is JSON with a uid, each panel has
// a query, every query parses with Prometheus' PromQL parser once Grafana's
// variables are replaced, and names only exported metrics.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: uid %q, %d panels", dashboardFile, d.UID, len(d.Panels))
	}
	have := exported(t)
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			for _, n := range metricNames(t, "panel "+p.Title, grafanaVars.Replace(q.Expr)) {
				if !slices.Contains(have, n) {
					t.Errorf("panel %q names %s, which neither program exports", p.Title, n)
				}
			}
		}
	}
}

// TestMetricNamesCheckFails: the name check refuses a metric nothing
// exports (so the tests above would catch a renamed metric).
func TestMetricNamesCheckFails(t *testing.T) {
	names := metricNames(t, "probe", `rate(nico_no_such_metric_total[5m]) > 0`)
	if !slices.Equal(names, []string{"nico_no_such_metric_total"}) || slices.Contains(exported(t), names[0]) {
		t.Fatalf("names %v", names)
	}
}
