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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxFuncLines is the longest a function may be, from its func keyword to
// its closing brace, outside tests and bench/: functions small enough to
// read in one sitting.
const maxFuncLines = 80

// TestFunctionLength lists every non-test function over maxFuncLines.
func TestFunctionLength(t *testing.T) {
	var long []string
	for _, f := range goFiles(t, false) {
		for _, decl := range f.ast.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			n := f.fset.Position(fn.End()).Line - f.fset.Position(fn.Pos()).Line + 1
			if n <= maxFuncLines {
				continue
			}
			long = append(long, fmt.Sprintf("%s:%s (%d lines)", f.rel, funcName(fn), n))
		}
	}
	slices.Sort(long)
	if len(long) > 0 {
		assert.Failf(t, "functions over maxFuncLines", "%d functions over %d lines; split them:\n  %s", len(long), maxFuncLines, strings.Join(long, "\n  "))
	}
}

// maxFileLines is the most lines a non-test file outside bench/ may have:
// a file holds one concept, readable in a sitting.
const maxFileLines = 500

// longFilesAllowed are files allowed over maxFileLines: none, every file
// having been split by concept. A file added here says why it is one.
var longFilesAllowed = []string{}

// TestFileLength lists every non-test file over maxFileLines, and every
// file of longFilesAllowed that no longer is.
func TestFileLength(t *testing.T) {
	var long []string
	over := map[string]bool{}
	for _, f := range goFiles(t, false) {
		n := f.fset.File(f.ast.Pos()).LineCount()
		if n > maxFileLines {
			over[f.rel] = true
			if !slices.Contains(longFilesAllowed, f.rel) {
				long = append(long, fmt.Sprintf("%s (%d lines)", f.rel, n))
			}
		}
	}
	if len(long) > 0 {
		assert.Failf(t, "files over maxFileLines", "%d files over %d lines; split them by concept:\n  %s", len(long), maxFileLines, strings.Join(long, "\n  "))
	}
	for _, rel := range longFilesAllowed {
		assert.Truef(t, over[rel], "%s is no longer over %d lines: take it out of longFilesAllowed", rel, maxFileLines)
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

// walkGo calls fn with every Go file of the module outside bench/ (a
// module of its own), bin/, out/, data/, testdata and hidden directories.
func walkGo(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return fn(path)
	})
}

func parseGo(fset *token.FileSet, path string) (*ast.File, error) {
	return parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
}

// moduleRoot is the directory of the module's go.mod, two levels up.
func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	return root
}
