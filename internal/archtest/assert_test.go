package archtest

import (
	"fmt"
	"go/ast"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The tests assert with testify: require (stop the test) and assert (go
// on), one style to read and one failure format. bareAssertionsLeft
// counts, per directory, the calls of t.Fatal, t.Fatalf, t.Error and
// t.Errorf its tests may still make: none since every test was converted.
// A directory given a count here (tests brought in from elsewhere, say)
// may not have more, and the count is lowered as its files are converted.
var bareAssertionsLeft = map[string]int{}

// bareAssertionDirsExempt are directories whose tests call t.Error or
// t.Fatal on purpose: none.
var bareAssertionDirsExempt = []string{}

// TestAssertionsAreTestify counts the bare assertions in each
// directory's tests against bareAssertionsLeft: more is refused, fewer
// asks for the count to be lowered, so that it only goes down.
func TestAssertionsAreTestify(t *testing.T) {
	got := map[string]int{}
	for _, f := range goFiles(t, true) {
		if !strings.HasSuffix(f.rel, "_test.go") {
			continue
		}
		dir := path.Dir(f.rel)
		if slices.Contains(bareAssertionDirsExempt, dir) {
			continue
		}
		if n := bareAssertions(f.ast); n > 0 {
			got[dir] += n
		}
	}
	var problems []string
	for _, dir := range slices.Sorted(maps.Keys(got)) {
		switch left, n := bareAssertionsLeft[dir], got[dir]; {
		case n > left:
			problems = append(problems, fmt.Sprintf("%s: %d bare t.Fatal/t.Error calls, %d allowed: assert with require or assert (testify)", dir, n, left))
		case n < left:
			problems = append(problems, fmt.Sprintf("%s: %d bare t.Fatal/t.Error calls left: lower bareAssertionsLeft from %d", dir, n, left))
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(bareAssertionsLeft)) {
		if got[dir] == 0 {
			problems = append(problems, fmt.Sprintf("%s: no bare t.Fatal/t.Error call left: drop it from bareAssertionsLeft", dir))
		}
	}
	assert.Empty(t, problems, "directories off their count of bare assertions")
}

// bareAssertions counts the calls of Fatal, Fatalf, Error and Errorf on
// the names f declares as a parameter of a testing type (*testing.T,
// *testing.B, *testing.F, testing.TB).
func bareAssertions(f *ast.File) int {
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		ft, ok := n.(*ast.FuncType)
		if !ok || ft.Params == nil {
			return true
		}
		for _, p := range ft.Params.List {
			if isTestingType(p.Type) {
				for _, name := range p.Names {
					names[name.Name] = true
				}
			}
		}
		return true
	})
	n := 0
	ast.Inspect(f, func(node ast.Node) bool {
		call, ok := node.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		recv, ok := sel.X.(*ast.Ident)
		if ok && names[recv.Name] && slices.Contains([]string{"Fatal", "Fatalf", "Error", "Errorf"}, sel.Sel.Name) {
			n++
		}
		return true
	})
	return n
}

func isTestingType(e ast.Expr) bool {
	if star, ok := e.(*ast.StarExpr); ok {
		e = star.X
	}
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "testing" && slices.Contains([]string{"T", "B", "F", "TB"}, sel.Sel.Name)
}

// TestNoRequireOffTheTestGoroutine refuses a require call in a function
// run on a goroutine of its own (a go statement, a WaitGroup's or an
// errgroup's Go, an HTTP handler): require's FailNow ends only the
// goroutine it runs on, so the test would go on; assert marks the failure
// and returns.
func TestNoRequireOffTheTestGoroutine(t *testing.T) {
	var found []string
	for _, f := range goFiles(t, true) {
		if !strings.HasSuffix(f.rel, "_test.go") {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			var body ast.Node
			switch g := n.(type) {
			case *ast.GoStmt:
				body = g.Call
			case *ast.CallExpr:
				if sel, ok := g.Fun.(*ast.SelectorExpr); ok && slices.Contains([]string{"Go", "HandlerFunc", "HandleFunc"}, sel.Sel.Name) {
					body = g
				}
			}
			if body == nil {
				return true
			}
			ast.Inspect(body, func(m ast.Node) bool {
				if c, ok := m.(*ast.CallExpr); ok {
					if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == "require" {
							found = append(found, fmt.Sprintf("%s:%d", f.rel, f.fset.Position(c.Pos()).Line))
						}
					}
				}
				return true
			})
			return false
		})
	}
	assert.Empty(t, found, "require called off the test's goroutine: use assert there")
}
