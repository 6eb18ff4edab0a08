package promtool

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

const (
	chartDir      = "../../../charts/flotilla-hub"
	dashboardFile = chartDir + "/files/grafana-dashboard.json"
	metricsList   = "testdata/metric-names.txt"
)

// toggles turn on the chart's monitoring objects.
var toggles = []string{"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.grafanaDashboard.enabled=true"}

// TestPrometheusRules renders the chart's PrometheusRule with the default
// thresholds and runs `promtool check rules` and `promtool test rules`
// (testdata/prometheus-rules.test.yaml) on its groups.
func TestPrometheusRules(t *testing.T) {
	promtool := binary(t, "promtool", "github.com/prometheus/prometheus/cmd/promtool", ".")
	dir := t.TempDir()
	writeRules(t, renderedRules(t), filepath.Join(dir, "rules.yaml"))
	tests, err := os.ReadFile("testdata/prometheus-rules.test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules.test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "rules.test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// TestPrometheusRuleThresholds checks the values reach the rules.
func TestPrometheusRuleThresholds(t *testing.T) {
	rules := renderedRules(t, "--set", "metrics.prometheusRule.leaseLateSeconds=90", "--set", "metrics.prometheusRule.leaseLatePercent=50",
		"--set", "metrics.prometheusRule.clusterUnknownFor=3m")
	want := map[string][]string{
		"FlotillaLeasesLateFleetWide": {"> 90", "> 0.5", "for: 2m", "More than 50 %"},
		"FlotillaClusterUnknown":      {"for: 3m"},
	}
	for _, r := range rules.Groups[0].Rules {
		b, err := yaml.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range want[r.Alert] {
			if !strings.Contains(string(b), s) {
				t.Errorf("rule %s does not say %q:\n%s", r.Alert, s, b)
			}
		}
	}
}

// TestGrafanaDashboard checks the dashboard is JSON Grafana loads: a recent
// schema, a Prometheus data source variable every query uses, unique panel
// ids, and queries that parse.
func TestGrafanaDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.SchemaVersion < 39 {
		t.Errorf("schemaVersion %d, want at least 39 (Grafana 11)", d.SchemaVersion)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both needed", d.UID, d.Title)
	}
	if i := slices.IndexFunc(d.Templating.List, func(v variable) bool { return v.Name == "datasource" }); i < 0 ||
		d.Templating.List[i].Type != "datasource" || d.Templating.List[i].Query != "prometheus" {
		t.Errorf("no datasource variable of type datasource for prometheus in %+v", d.Templating.List)
	}
	ids := map[int]string{}
	cells := map[[2]int]string{} // grid cell to the panel on it
	queries := 0
	for _, p := range d.allPanels() {
		if prev, ok := ids[p.ID]; ok {
			t.Errorf("panels %q and %q share id %d", prev, p.Title, p.ID)
		}
		ids[p.ID] = p.Title
		if g := p.GridPos; g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q at %+v: outside Grafana's 24-column grid", p.Title, g)
		}
		for x := p.GridPos.X; x < p.GridPos.X+p.GridPos.W; x++ {
			for y := p.GridPos.Y; y < p.GridPos.Y+p.GridPos.H; y++ {
				if prev, ok := cells[[2]int{x, y}]; ok && prev != p.Title {
					t.Errorf("panels %q and %q overlap at %d,%d", prev, p.Title, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range append([]target{{Datasource: p.Datasource}}, p.Targets...) {
			if tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: datasource %+v, want uid ${datasource}", p.Title, tg.Datasource)
			}
		}
		for _, tg := range p.Targets {
			if _, err := metricNames(grafanaExpr(tg.Expr)); err != nil {
				t.Errorf("panel %q query %s: %v", p.Title, tg.RefID, err)
			}
			queries++
		}
	}
	t.Logf("%d panels, %d queries", len(ids), queries)
}

// TestChartMonitoringObjects checks the toggles: off by default; on, a
// PrometheusRule and a ConfigMap Grafana's sidecar loads, holding the
// dashboard file as it is.
func TestChartMonitoringObjects(t *testing.T) {
	dashboardJSON, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range render(t) {
		if obj.Kind == "PrometheusRule" || obj.Metadata.Labels["grafana_dashboard"] != "" {
			t.Errorf("default values render %s %s", obj.Kind, obj.Metadata.Name)
		}
	}
	var dashboards []manifest
	for _, obj := range render(t, append(toggles, "--set", "metrics.grafanaDashboard.labels.team=fleet", "--set", "metrics.grafanaDashboard.annotations.grafana_folder=Flotilla")...) {
		if obj.Kind == "ConfigMap" && obj.Metadata.Labels["grafana_dashboard"] == "1" {
			dashboards = append(dashboards, obj)
		}
	}
	if len(dashboards) != 1 {
		t.Fatalf("%d ConfigMaps labelled grafana_dashboard: \"1\", want 1", len(dashboards))
	}
	cm := dashboards[0]
	if cm.Metadata.Labels["team"] != "fleet" || cm.Metadata.Annotations["grafana_folder"] != "Flotilla" || cm.Metadata.Namespace != "flotilla-system" {
		t.Errorf("dashboard ConfigMap metadata %+v, want label team, annotation grafana_folder, release namespace", cm.Metadata)
	}
	if diff := cmp.Diff(strings.TrimSpace(string(dashboardJSON)), cm.Data["flotilla-hub.json"]); diff != "" {
		t.Errorf("ConfigMap's flotilla-hub.json differs from %s (-file +ConfigMap):\n%s", dashboardFile, diff)
	}
}

// TestMonitoringMetricNames checks testdata/metric-names.txt (which test/e2e
// checks against a real hub) lists exactly the metrics the rules and the
// dashboard use.
func TestMonitoringMetricNames(t *testing.T) {
	used := map[string]bool{}
	add := func(where, expr string) {
		t.Helper()
		names, err := metricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", where, err)
		}
		for _, n := range names {
			used[n] = true
		}
	}
	for _, r := range renderedRules(t).Groups[0].Rules {
		add("rule "+r.Alert, r.Expr)
	}
	d := readDashboard(t)
	for _, p := range d.allPanels() {
		for _, tg := range p.Targets {
			add("panel "+p.Title, grafanaExpr(tg.Expr))
		}
	}
	for _, v := range d.Templating.List {
		if m := labelValuesRE.FindStringSubmatch(v.Definition); m != nil {
			used[m[1]] = true
		}
	}
	listed := readMetricsList(t)
	if diff := cmp.Diff(listed, slices.Sorted(mapKeys(used))); diff != "" {
		t.Errorf("%s differs from the metrics the rules and dashboard use (-listed +used):\n%s", metricsList, diff)
	}
}

// labelValuesRE finds the metric of a Grafana label_values(metric, label) query.
var labelValuesRE = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,`)

// grafanaExpr replaces Grafana's variables with values PromQL parses.
func grafanaExpr(expr string) string {
	return strings.NewReplacer("$__rate_interval", "5m", "$cluster", ".*", "$lease_duration", "40").Replace(expr)
}

// metricNames parses expr and returns the metrics it selects, histogram
// series (_bucket, _sum, _count) under their histogram's name as
// /metrics families name them.
func metricNames(expr string) ([]string, error) {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var names []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			if name == "" {
				err = fmt.Errorf("%q selects series without a metric name", expr)
			}
			if base, ok := strings.CutSuffix(name, "_bucket"); ok {
				name = base
			}
			names = append(names, name)
		}
		return nil
	})
	return names, err
}

func readMetricsList(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(metricsList)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line, _, _ := strings.Cut(s.Text(), "#"); strings.TrimSpace(line) != "" {
			names = append(names, strings.Fields(line)[0])
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

func mapKeys(m map[string]bool) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// ruleFile is the part of a Prometheus rule file the tests look at.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// manifest is the part of a rendered object the tests look at.
type manifest struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec json.RawMessage   `json:"spec"`
	Data map[string]string `json:"data"`
}

// render lints and renders the chart with chartrender and args (--set ...).
func render(t *testing.T, args ...string) []manifest {
	t.Helper()
	chartrender := binary(t, "chartrender", "./cmd/chartrender", "..")
	args = append([]string{"--name", "flotilla-hub", chartDir}, args...)
	out, err := exec.Command(chartrender, args...).Output()
	if err != nil {
		t.Fatalf("chartrender %s: %v\n%s", strings.Join(args, " "), err, stderr(err))
	}
	var objs []manifest
	for doc := range strings.SplitSeq(string(out), "\n---") {
		var obj manifest
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("rendered manifest: %v\n%s", err, doc)
		}
		if obj.Kind != "" {
			objs = append(objs, obj)
		}
	}
	return objs
}

// renderedRules renders the chart with the monitoring toggles (and extra
// chartrender flags) and returns its PrometheusRule's spec.
func renderedRules(t *testing.T, extra ...string) ruleFile {
	t.Helper()
	var rules []ruleFile
	for _, obj := range render(t, append(toggles, extra...)...) {
		if obj.Kind != "PrometheusRule" {
			continue
		}
		var spec ruleFile
		if err := json.Unmarshal(obj.Spec, &spec); err != nil {
			t.Fatalf("PrometheusRule spec: %v", err)
		}
		rules = append(rules, spec)
	}
	if len(rules) != 1 || len(rules[0].Groups) != 1 {
		t.Fatalf("rendered %d PrometheusRules (%+v), want one with one group", len(rules), rules)
	}
	return rules[0]
}

func writeRules(t *testing.T, rules ruleFile, path string) {
	t.Helper()
	b, err := yaml.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dashboard is the part of Grafana's dashboard JSON the tests look at.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type variable struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Query      any    `json:"query"`
	Definition string `json:"definition"`
}

type panel struct {
	ID         int        `json:"id"`
	Type       string     `json:"type"`
	Title      string     `json:"title"`
	Datasource datasource `json:"datasource"`
	GridPos    struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"` // a collapsed row's
}

type target struct {
	RefID      string     `json:"refId"`
	Expr       string     `json:"expr"`
	Datasource datasource `json:"datasource"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func (d dashboard) allPanels() []panel {
	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	return all
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// binary returns $FLOTILLA_TESTBIN/name (build-testbin.sh builds both), or
// builds pkg in the module at dir.
func binary(t *testing.T, name, pkg, dir string) string {
	t.Helper()
	if testbin := os.Getenv("FLOTILLA_TESTBIN"); testbin != "" {
		if p := filepath.Join(testbin, name); fileExists(p) {
			return p
		}
	}
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func stderr(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}
