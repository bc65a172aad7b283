package fetch

import (
	"fmt"
	"reflect"
	"testing"
	"time"
)

// The module's testify needs a go.sum entry (go.yaml.in/yaml/v3) that this
// package may not add, so the tests use these few helpers instead.

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

// eventually polls f every tick until it holds or wait has passed.
func eventually(t testing.TB, wait, tick time.Duration, f func() bool, msg ...any) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal(msg...)
		}
		time.Sleep(tick)
	}
}
