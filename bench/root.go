package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/drover-crawl/drover/devstack"
)

// droverModule is the crawler's module path; bench is a module of its own
// nested in it (bench/go.mod, so that Colly stays out of the crawler's
// module graph), which devstack.RepoRoot would stop at.
const droverModule = "github.com/drover-crawl/drover"

// RepoRoot returns the drover repository's root: the first directory at or
// above the working directory whose go.mod declares the drover module.
func RepoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if modulePath(filepath.Join(d, "go.mod")) == droverModule {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of %s at or above %s: run the bench from the drover repository", droverModule, wd)
		}
	}
}

// modulePath is the module line of a go.mod file, or "".
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// TemporalBinary is bin/temporal in the repository root (devstack's own
// lookup stops at bench/go.mod).
func TemporalBinary() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return devstack.FindTemporalBinary(root)
}

// goBuild builds one of the crawler's mains (pkg relative to the
// repository root, e.g. "./worker") into bin, in the root module so that
// the binary is the one `make build` makes.
func goBuild(ctx context.Context, pkg, bin string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v: %s", pkg, err, out)
	}
	return nil
}
