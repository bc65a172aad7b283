// Package expect holds the few assertion helpers that the tests of fetch
// and urlrule share (they came with the URL rules when those left fetch):
// a test file binds them to its package's names (equal, must, check).
package expect

import (
	"fmt"
	"reflect"
	"testing"
)

// Equal reports an error when got and want are not deeply equal.
func Equal(t testing.TB, got, want any, msg ...any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v %s", got, want, fmt.Sprint(msg...))
	}
}

// Must stops the test with msg when cond does not hold.
func Must(t testing.TB, cond bool, msg ...any) {
	t.Helper()
	if !cond {
		t.Fatal(msg...)
	}
}

// Check reports an error with msg when cond does not hold.
func Check(t testing.TB, cond bool, msg ...any) {
	t.Helper()
	if !cond {
		t.Error(msg...)
	}
}
