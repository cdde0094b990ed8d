package workflows

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Every GetVersion call in the workflow code names a constant whose change
// ID is declared live in versions.go, and none reuses a retired ID: the list
// of live gates is the code's, not a comment's.
func TestVersionsAreDeclared(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	consts := map[string]string{} // constant name → its string value
	var calls []*ast.CallExpr
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if i < len(n.Values) {
						if lit, ok := n.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "GetVersion" {
					calls = append(calls, n)
				}
			}
			return true
		})
	}
	retired := map[string]bool{}
	for _, r := range retiredChanges {
		if retired[r.ID] {
			t.Errorf("change %q retired twice", r.ID)
		}
		retired[r.ID] = true
	}
	asked := map[string]bool{}
	for _, c := range calls {
		at := fset.Position(c.Pos())
		id, ok := c.Args[1].(*ast.Ident)
		if len(c.Args) != 4 || !ok {
			t.Errorf("%s: GetVersion's change ID is not a named constant", at)
			continue
		}
		v, ok := consts[id.Name]
		switch {
		case !ok:
			t.Errorf("%s: GetVersion names %s, not a string constant of this package", at, id.Name)
		case retired[v]:
			t.Errorf("%s: GetVersion asks %q, a retired change ID: take a new one", at, v)
		case liveChanges[v] != id.Name:
			t.Errorf("%s: GetVersion asks %q (%s), which versions.go does not declare live", at, v, id.Name)
		}
		asked[v] = true
	}
	for v := range liveChanges {
		if !asked[v] {
			t.Errorf("versions.go declares %q live, but no GetVersion asks it: retire it", v)
		}
	}
}
