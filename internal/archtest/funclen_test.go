package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be, from its func keyword to
// its closing brace, outside tests and bench/: functions small enough to
// read in one sitting.
const maxFuncLines = 80

// TestFunctionLength lists every non-test function over maxFuncLines.
func TestFunctionLength(t *testing.T) {
	root := moduleRoot(t)
	fset := token.NewFileSet()
	var long []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "bench" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || rel == "bin" || rel == "out" || rel == "data" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n <= maxFuncLines {
				continue
			}
			name := filepath.ToSlash(rel) + ":" + funcName(fn)
			long = append(long, fmt.Sprintf("%s (%d lines)", name, n))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(long)
	if len(long) > 0 {
		t.Errorf("%d functions over %d lines; split them:\n  %s", len(long), maxFuncLines, strings.Join(long, "\n  "))
	}
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	if ix, ok := typ.(*ast.IndexExpr); ok {
		typ = ix.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// moduleRoot is the directory of the module's go.mod, two levels up.
func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}
