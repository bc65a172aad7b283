package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// The bench is a nested module: the repository root (where bin/temporal
// lives and the crawler's mains are built) is above bench/go.mod, not at it.
func TestRepoRootIsTheCrawlersModule(t *testing.T) {
	root, err := RepoRoot()
	require.NoError(t, err)
	wd, err := os.Getwd()
	require.NoError(t, err)
	require.Equal(t, filepath.Dir(wd), root, "RepoRoot(), want bench/'s parent")
	require.Equalf(t, droverModule, modulePath(filepath.Join(root, "go.mod")), "module at %s", root)
	require.Equal(t, droverModule+"/bench", modulePath(filepath.Join(wd, "go.mod")), "module bench/go.mod declares")
}
