// Package webtest serves a test web (package testweb) for the length of
// a test.
package webtest

import (
	"testing"

	"github.com/drover-crawl/drover/testweb"
)

// Start serves a test web of cfg, closed at the end of the test; an error
// to start fails the test.
func Start(t testing.TB, cfg testweb.Config) *testweb.Web {
	t.Helper()
	web, err := testweb.Start(cfg)
	if err != nil {
		t.Fatalf("starting the test web: %v", err)
	}
	t.Cleanup(func() { web.Close() })
	return web
}
