package rulecheck

import (
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"
)

const (
	ruleFile    = "../../operator/monitoring/prometheusrule.yaml"
	metricsFile = "../../operator/controller/metrics.go"
)

// parse checks a PrometheusRule's spec as Prometheus loads a rule file.
func parse(t *testing.T, doc []byte) (*rulefmt.RuleGroups, []error) {
	t.Helper()
	var obj struct {
		Kind string         `json:"kind"`
		Spec map[string]any `json:"spec"`
	}
	if err := yaml.Unmarshal(doc, &obj); err != nil {
		t.Fatalf("decoding the PrometheusRule: %v", err)
	}
	if obj.Kind != "PrometheusRule" {
		t.Fatalf("kind %q, want PrometheusRule", obj.Kind)
	}
	spec, err := yaml.Marshal(obj.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return rulefmt.Parse(spec, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.Default())
}

// exported are the metric families the operator registers: torus_ and the
// names in its metrics source.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	src, err := os.ReadFile(metricsFile)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?:counter|histogram)\("([a-z_]+)"|NewDesc\("([a-z_]+)"`).FindAllSubmatch(src, -1) {
		if len(m[1]) > 0 {
			names["torus_"+string(m[1])] = true
		} else {
			names[string(m[2])] = true
		}
	}
	if len(names) < 5 {
		t.Fatalf("found only %v in %s", names, metricsFile)
	}
	return names
}

func TestShippedRules(t *testing.T) {
	doc, err := os.ReadFile(filepath.Clean(ruleFile))
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := parse(t, doc)
	for _, err := range errs {
		t.Errorf("Prometheus refuses the rules: %v", err)
	}
	if t.Failed() {
		return
	}
	names := exported(t)
	p := parser.NewParser(parser.Options{})
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts++
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("alert %s lacks a summary or a description", r.Alert)
			}
			expr, err := p.ParseExpr(r.Expr)
			if err != nil {
				t.Fatalf("alert %s: %v", r.Alert, err)
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				family := vs.Name
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					if base, ok := strings.CutSuffix(family, suffix); ok && names[base] {
						family = base
					}
				}
				if !names[family] {
					t.Errorf("alert %s reads %s, which the operator does not export (it exports %v)", r.Alert, vs.Name, names)
				}
				return nil
			})
		}
	}
	if alerts < 3 {
		t.Errorf("%d alerts; want the three that matter: failing jobs, jobs not admitted, reconcile errors", alerts)
	}
}

// The check bites: Prometheus's parser refuses what it would not load.
func TestBrokenRulesAreRefused(t *testing.T) {
	for name, rule := range map[string]string{
		"bad PromQL":    `{alert: A, expr: "sum by (namespace (x)", annotations: {summary: s, description: d}}`,
		"bad template":  `{alert: A, expr: up == 0, annotations: {summary: "{{ $labels.namespace ", description: d}}`,
		"unknown field": `{alert: A, expr: up == 0, severity: high}`,
		"no alert name": `{expr: up == 0}`,
		"bad for":       `{alert: A, expr: up == 0, for: soon}`,
	} {
		doc := "kind: PrometheusRule\nspec:\n  groups:\n  - name: g\n    rules:\n    - " + rule + "\n"
		if _, errs := parse(t, []byte(doc)); len(errs) == 0 {
			t.Errorf("%s: accepted %s", name, rule)
		}
	}
}
