package sink

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// require is a stand-in for testify's require with the same call shapes:
// testify v1.12 imports go-spew, go-difflib and go.yaml.in/yaml/v3, whose
// go.sum entries the module does not carry yet, and this package must not
// edit go.mod/go.sum. Swap the import back once they are there.
var require checks

type checks struct{}

func msg(args []any) string {
	if len(args) == 0 {
		return ""
	}
	if f, ok := args[0].(string); ok {
		return ": " + fmt.Sprintf(f, args[1:]...)
	}
	return ": " + fmt.Sprint(args...)
}

func (checks) NoError(t testing.TB, err error, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v%s", err, msg(args))
	}
}

func (checks) Error(t testing.TB, err error, args ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error%s", msg(args))
	}
}

func (checks) ErrorIs(t testing.TB, err, target error, args ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v is not %v%s", err, target, msg(args))
	}
}

func (checks) ErrorContains(t testing.TB, err error, sub string, args ...any) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), sub) {
		t.Fatalf("error %v does not contain %q%s", err, sub, msg(args))
	}
}

func (checks) True(t testing.TB, ok bool, args ...any) {
	t.Helper()
	if !ok {
		t.Fatalf("expected true%s", msg(args))
	}
}

func (checks) Equal(t testing.TB, want, got any, args ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("not equal%s:\nwant %#v\n got %#v", msg(args), want, got)
	}
}

func (checks) Less(t testing.TB, a, b int64, args ...any) {
	t.Helper()
	if a >= b {
		t.Fatalf("%d is not less than %d%s", a, b, msg(args))
	}
}

func (checks) NotNil(t testing.TB, v any, args ...any) {
	t.Helper()
	if v == nil || (reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
		t.Fatalf("expected non-nil%s", msg(args))
	}
}

func (checks) Len(t testing.TB, v any, n int, args ...any) {
	t.Helper()
	if l := reflect.ValueOf(v).Len(); l != n {
		t.Fatalf("length %d, want %d%s", l, n, msg(args))
	}
}

func (checks) Empty(t testing.TB, v any, args ...any) {
	t.Helper()
	if l := reflect.ValueOf(v).Len(); l != 0 {
		t.Fatalf("expected empty, has %d%s: %v", l, msg(args), v)
	}
}
