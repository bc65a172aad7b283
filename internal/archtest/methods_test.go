package archtest

import (
	"fmt"
	"go/ast"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// maxMethods is the most methods a type may declare outside tests and
// bench/: a type with more holds several concepts, each of which wants a
// type of its own.
const maxMethods = 35

// manyMethodsAllowed are the types over maxMethods, as package/Type, with
// the most methods each may have: a ratchet, which a change may lower and
// never raise. A type that comes down to maxMethods leaves the list.
var manyMethodsAllowed = map[string]int{}

// TestMethodCount lists every type with more methods than maxMethods, or
// than manyMethodsAllowed lets it have.
func TestMethodCount(t *testing.T) {
	count := map[string]int{}
	for _, f := range goFiles(t, false) {
		for _, decl := range f.ast.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv == nil {
				continue
			}
			name := funcName(fn)
			typ, _, ok := strings.Cut(name, ".")
			if !ok {
				continue
			}
			count[path.Dir(f.rel)+"/"+typ]++
		}
	}
	var over []string
	for typ, n := range count {
		allowed, listed := manyMethodsAllowed[typ]
		switch {
		case listed && n <= maxMethods:
			assert.Failf(t, "a type of manyMethodsAllowed is no longer over maxMethods", "%s has %d methods, no more than %d: take it out of manyMethodsAllowed", typ, n, maxMethods)
		case listed && n > allowed:
			over = append(over, fmt.Sprintf("%s (%d methods, %d allowed until it is split)", typ, n, allowed))
		case listed && n < allowed:
			assert.Failf(t, "a type of manyMethodsAllowed has fewer methods", "%s is down to %d methods: lower its manyMethodsAllowed entry from %d", typ, n, allowed)
		case !listed && n > maxMethods:
			over = append(over, fmt.Sprintf("%s (%d methods)", typ, n))
		}
	}
	for typ := range manyMethodsAllowed {
		_, ok := count[typ]
		assert.Truef(t, ok, "%s has no methods any more (renamed?): take it out of manyMethodsAllowed", typ)
	}
	slices.Sort(over)
	if len(over) > 0 {
		assert.Failf(t, "types over maxMethods", "%d types over %d methods; split them by concept:\n  %s", len(over), maxMethods, strings.Join(over, "\n  "))
	}
}
