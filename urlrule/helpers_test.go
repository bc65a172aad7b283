package urlrule

import (
	"fmt"
	"reflect"
	"testing"
)

// The same few helpers as fetch's tests (fetch/helpers_test.go), which these
// tests used before the URL rules left fetch.

func equal(t testing.TB, got, want any, msg ...any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v %s", got, want, fmt.Sprint(msg...))
	}
}

func must(t testing.TB, cond bool, msg ...any) {
	t.Helper()
	if !cond {
		t.Fatal(msg...)
	}
}

func check(t testing.TB, cond bool, msg ...any) {
	t.Helper()
	if !cond {
		t.Error(msg...)
	}
}
