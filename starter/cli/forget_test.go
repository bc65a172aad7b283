package cli

import (
	"context"
	"errors"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

// `forget` drops a lineage's history on every scheduler, against a real
// one: done for a lineage no open campaign uses, refused (exit 1, naming
// the campaign) for the lineage of one still open, and a scheduler it
// cannot reach is named while the others drop theirs.
func TestForgetFromScheduler(t *testing.T) {
	addr := startScheduler(t)
	id := failingCampaign(t, addr)
	forget := func(ctx context.Context, addrs []string, token, lineage string) error {
		return session.Client{Token: token}.ForgetHistory(ctx, addrs, lineage)
	}
	fake := newFake()
	fake.add("live", workflows.Status{State: campaign.StateRunning}, Execution{Status: StatusRunning})
	fake.add("old-news", workflows.Status{State: campaign.StateCompleted}, Execution{Status: StatusCompleted})
	app := func(addrs ...string) *App {
		return &App{Env: Env{Env: envconf.Env{Schedulers: addrs}}, Dial: dialTo(fake), ForgetHistory: forget}
	}

	code, out, errOut := runApp(t, app(addr), "forget", "old-news")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "forgot the fetch history of lineage old-news on "+addr+"\n", out)

	code, _, errOut = runApp(t, app(addr), "forget", id)
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errOut, "lineage "+id+" is in use on scheduler")
	assert.Contains(t, errOut, "by campaign "+id)
	assert.Contains(t, errOut, "stop it")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()
	code, _, errOut = runApp(t, app(dead, addr), "forget", "old-news")
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errOut, "scheduler "+dead)
	assert.NotContains(t, errOut, "scheduler "+addr+":")

	// The campaign whose ID is the lineage runs: Temporal says so first.
	code, _, errOut = runApp(t, app(addr), "forget", "live")
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errOut, "campaign live is running and writes lineage live")

	// Temporal out of reach: a warning, and the schedulers decide.
	noTemporal := app(addr)
	noTemporal.Dial = func(context.Context, Env) (Campaigns, error) { return nil, errors.New("temporal down") }
	code, _, errOut = runApp(t, noTemporal, "forget", "old-news")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, errOut, "warning: Temporal not reached")

	code, _, errOut = runApp(t, app(addr), "forget")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "forget takes LINEAGE")
}
