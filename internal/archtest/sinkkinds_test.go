package archtest

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/drover-crawl/drover/sink/sinkuri"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sinkKindsAllowed are the files, besides sink/sinkuri, that may still
// decide on a sink URI's kind by its scheme: none.
var sinkKindsAllowed = []string{}

// TestSinkKindsRegisteredOnce: a kind of sink is named in one place, the
// table of sink/sinkuri (its URI's form) and package sink's kinds table
// (its open and check), so a new sink is one file and one entry of each.
// No other non-test file compares a string with a sink's scheme or
// prefix (==, !=, a case of a switch, strings.HasPrefix, CutPrefix or
// TrimPrefix): it calls sinkuri.Lookup or sinkuri.Check instead.
func TestSinkKindsRegisteredOnce(t *testing.T) {
	schemes := map[string]bool{}
	for _, k := range sinkuri.Kinds {
		schemes[k.Name] = true
		for _, p := range k.Prefixes {
			schemes[p] = true
			schemes[strings.TrimSuffix(strings.TrimSuffix(p, "//"), ":")] = true
		}
	}
	var found []string
	for _, f := range goFiles(t, false) {
		if strings.HasPrefix(f.rel, "sink/sinkuri/") || slices.Contains(sinkKindsAllowed, f.rel) {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			for _, lit := range schemeDecisions(n) {
				if s, err := strconv.Unquote(lit.Value); err == nil && schemes[s] {
					found = append(found, f.rel+":"+strconv.Itoa(f.fset.Position(lit.Pos()).Line)+": "+lit.Value)
				}
			}
			return true
		})
	}
	if len(found) > 0 {
		assert.Failf(t, "decisions on a sink's scheme outside sink/sinkuri", "%d decisions on a sink's scheme outside sink/sinkuri; call sinkuri.Lookup (or add the kind to sinkuri.Kinds):\n  %s",
			len(found), strings.Join(found, "\n  "))
	}
}

// schemeDecisions are the string literals n compares a string with.
func schemeDecisions(n ast.Node) []*ast.BasicLit {
	var exprs []ast.Expr
	switch n := n.(type) {
	case *ast.CaseClause:
		exprs = n.List
	case *ast.BinaryExpr:
		if n.Op == token.EQL || n.Op == token.NEQ {
			exprs = []ast.Expr{n.X, n.Y}
		}
	case *ast.CallExpr:
		if sel, ok := n.Fun.(*ast.SelectorExpr); ok && len(n.Args) == 2 {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "strings" &&
				slices.Contains([]string{"HasPrefix", "CutPrefix", "TrimPrefix"}, sel.Sel.Name) {
				exprs = n.Args[1:]
			}
		}
	}
	var lits []*ast.BasicLit
	for _, e := range exprs {
		if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			lits = append(lits, lit)
		}
	}
	return lits
}

// goFile is a parsed Go file of the module.
type goFile struct {
	rel  string // slash-separated, from the module root
	fset *token.FileSet
	ast  *ast.File
}

// goFiles parses the module's Go files outside bench/ (its own module),
// testdata and hidden directories; with tests, the _test.go files too.
func goFiles(t *testing.T, tests bool) []goFile {
	t.Helper()
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var files []goFile
	err := walkGo(root, func(path string) error {
		if !tests && strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parseGo(fset, path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		files = append(files, goFile{rel: filepath.ToSlash(rel), fset: fset, ast: f})
		return nil
	})
	require.NoError(t, err)
	return files
}
