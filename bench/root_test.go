package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// The bench is a nested module: the repository root (where bin/temporal
// lives and the crawler's mains are built) is above bench/go.mod, not at it.
func TestRepoRootIsTheCrawlersModule(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Dir(wd); root != want {
		t.Fatalf("RepoRoot() = %s, want %s (bench/'s parent)", root, want)
	}
	if got := modulePath(filepath.Join(root, "go.mod")); got != droverModule {
		t.Fatalf("module at %s = %q, want %q", root, got, droverModule)
	}
	if got := modulePath(filepath.Join(wd, "go.mod")); got != droverModule+"/bench" {
		t.Fatalf("bench/go.mod declares %q, want %q", got, droverModule+"/bench")
	}
}
