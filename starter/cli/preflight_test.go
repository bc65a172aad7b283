package cli

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/session"
)

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestPreflight: the starter's check before a start, against a real
// scheduler and sinks. One scheduler answering is enough, whatever its
// place in the list; none answering is one line naming every address; each
// sink that cannot take pages is a line of its own, naming the sink and the
// fix.
func TestPreflight(t *testing.T) {
	live := startScheduler(t)
	dead1, dead2 := deadAddr(t), deadAddr(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	ctx := context.Background()
	env := func(schedulers ...string) Env {
		return Env{Env: envconf.Env{Schedulers: schedulers, Token: session.DevToken}}
	}
	// A campaign the scheduler can run (its check validates the config).
	seeds := []string{"http://127.0.0.1:9/"}
	good := campaign.Config{ID: "preflight", Seeds: seeds, Sinks: []string{"warc:" + dir}}
	badSink := "warc:" + filepath.Join(file, "sub")
	bad := campaign.Config{ID: "preflight", Seeds: seeds, Sinks: []string{"warc:" + dir, badSink}}
	badLine := "warc sink " + badSink + ": " + file + " is not a directory; make warc:DIR a directory the workers can write, or pick another"

	require.NoError(t, Preflight(ctx, env(live), good))
	require.NoError(t, Preflight(ctx, env(dead1, live), good), "the second scheduler answers")

	err := Preflight(ctx, env(dead1, dead2), good)
	require.Error(t, err)
	require.Len(t, strings.Split(err.Error(), "\n"), 1, "one line for the schedulers: %q", err)
	require.ErrorContains(t, err, dead1)
	require.ErrorContains(t, err, dead2)

	err = Preflight(ctx, env(live), bad)
	require.Error(t, err)
	require.Equal(t, badLine, err.Error())

	err = Preflight(ctx, env(dead1), bad)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2, "a line for the scheduler and one for the sink: %q", err)
	require.Contains(t, lines[0], dead1)
	require.Equal(t, badLine, lines[1])
}
