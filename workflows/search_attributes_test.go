package workflows_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/herald-notify/herald/workflows"
)

// TestSearchAttributesListsEveryKey: every package-level SearchAttr* key is in
// workflows.SearchAttributes, the list `herald migrate` registers, so a key
// added without it fails here rather than at the first upsert on a server that
// does not know it.
func TestSearchAttributesListsEveryKey(t *testing.T) {
	listed := map[string]bool{}
	for _, key := range workflows.SearchAttributes {
		if listed[key.GetName()] {
			t.Errorf("SearchAttributes lists %s twice", key.GetName())
		}
		listed[key.GetName()] = true
	}
	declared := map[string]string{} // key name → variable
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "SearchAttr") || i >= len(vs.Values) {
					continue
				}
				// temporal.NewSearchAttributeKey…("Name")
				call, ok := vs.Values[i].(*ast.CallExpr)
				if !ok || len(call.Args) != 1 {
					continue
				}
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					name, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					declared[name] = id.Name
				}
			}
			return false
		})
	}
	for name, v := range declared {
		if !listed[name] {
			t.Errorf("%s (%s) is not in workflows.SearchAttributes", v, name)
		}
	}
	if len(declared) != len(listed) || len(declared) < 5 {
		t.Errorf("found %d SearchAttr* keys (%v), SearchAttributes lists %d", len(declared), declared, len(listed))
	}
}
