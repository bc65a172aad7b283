package archtest

import (
	"go/ast"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// errorKeyAllowed are the files that may still log an error under the key
// "error" rather than "err": none.
var errorKeyAllowed = []string{}

// logMsgArgs are the leveled logging methods (slog's, and Temporal's
// activity and workflow loggers') and how many arguments come before
// their key-value pairs.
var logMsgArgs = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1,
	"DebugContext": 2, "InfoContext": 2, "WarnContext": 2, "ErrorContext": 2,
	"Log": 3, "With": 0,
}

// TestLogErrorKeyIsErr: every log call, tests included, gives an error
// under the key "err", so that one query finds every logged error. It
// finds the key "error" in a call's key-value pairs (a string key and its
// value, or an slog.Attr) and in slog.Any("error", ...) and its kin.
func TestLogErrorKeyIsErr(t *testing.T) {
	var found []string
	for _, f := range goFiles(t, true) {
		if slices.Contains(errorKeyAllowed, f.rel) {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			if lit := errorKey(n); lit != nil {
				found = append(found, f.rel+":"+strconv.Itoa(f.fset.Position(lit.Pos()).Line))
			}
			return true
		})
	}
	if len(found) > 0 {
		assert.Failf(t, `log calls give an error under the key "error"`, "%d log calls give an error under the key \"error\"; use \"err\":\n  %s", len(found), strings.Join(found, "\n  "))
	}
}

// errorKey is the literal "error" n uses as a log key, or nil.
func errorKey(n ast.Node) *ast.BasicLit {
	call, ok := n.(*ast.CallExpr)
	if !ok {
		return nil
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "slog" && len(call.Args) > 0 {
		if _, leveled := logMsgArgs[sel.Sel.Name]; !leveled {
			return errorLit(call.Args[0]) // slog.Any, slog.String, slog.Group, ...
		}
	}
	skip, ok := logMsgArgs[sel.Sel.Name]
	if !ok || len(call.Args) < skip {
		return nil
	}
	// As slog reads them: a string is a key and the next argument its
	// value; anything else is an Attr.
	for i := skip; i < len(call.Args); i++ {
		lit, ok := call.Args[i].(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			continue
		}
		if errorLit(lit) != nil {
			return lit
		}
		i++
	}
	return nil
}

func errorLit(e ast.Expr) *ast.BasicLit {
	if lit, ok := e.(*ast.BasicLit); ok && lit.Kind == token.STRING && lit.Value == `"error"` {
		return lit
	}
	return nil
}
