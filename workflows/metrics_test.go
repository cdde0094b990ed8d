package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// Every metric name declared in metrics.go has help text, so that the
// worker's /metrics passes promtool check metrics.
func TestEveryMetricHasHelp(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "metrics.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Metric") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				name, _ := strconv.Unquote(lit.Value)
				names++
				if strings.TrimSpace(MetricHelp[name]) == "" {
					t.Errorf("%s (%s) has no help text in MetricHelp", id.Name, name)
				}
			}
		}
	}
	if names == 0 || names != len(MetricHelp) {
		t.Errorf("metrics.go declares %d metric names, MetricHelp has %d", names, len(MetricHelp))
	}
}
