package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-crawl/drover/workflows"
)

// signalArg returns a control command's signal name and its (one struct)
// argument. Pause and resume carry the clock as a sequence number, so that
// the workflow keeps their order when both reach it in one task.
func (a *App) signalArg(name string) (string, any) {
	seq := a.Now().UnixNano()
	switch name {
	case "pause":
		return workflows.SignalPause, workflows.PauseSignal{Seq: seq}
	case "resume":
		return workflows.SignalResume, workflows.ResumeSignal{Seq: seq}
	}
	return workflows.SignalStop, workflows.StopSignal{}
}

func (a *App) signalCommand(name, short string) *cobra.Command {
	return &cobra.Command{
		Use:   name + " ID",
		Short: short,
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			sig, arg := a.signalArg(name)
			if err := a.signal(cmd.Context(), id, sig, arg); err != nil {
				return err
			}
			fmt.Fprintf(a.Out, "sent %s to campaign %s\n", name, id)
			return nil
		},
	}
}

// DefaultStopTimeout bounds how long `stop` waits for a campaign to close:
// its fetchers stop through their schedulers (a fraction of a second; at
// their next heartbeat, within 5 s, where a scheduler cannot be reached;
// tens of seconds for one whose worker died), then the campaign's queues
// are removed.
const DefaultStopTimeout = 2 * time.Minute

func (a *App) stopCommand() *cobra.Command {
	var noWait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stop ID",
		Short: "Stop a campaign for good, and wait until it has stopped",
		Long: `Stop a campaign for good: send it the stop signal and wait until its workflow
has closed (its fetchers stopped, its queues removed), so that
` + "`starter stop X && starter start --id X ...`" + ` works. Exit 1 when it has not
stopped within --timeout (the signal stays sent); --no-wait only sends it.

On a campaign that was terminated or failed, stop removes what it left in
the frontier.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, ctx := args[0], cmd.Context()
			if timeout <= 0 {
				return usagef("--timeout %s: must be more than 0 (--no-wait does not wait)", timeout)
			}
			sig, arg := a.signalArg("stop")
			if err := a.signal(ctx, id, sig, arg); err != nil {
				if done, rerr := a.releaseEnded(ctx, id); done || rerr != nil {
					return rerr
				}
				return err
			}
			if noWait {
				fmt.Fprintf(a.Out, "sent stop to campaign %s\n", id)
				return nil
			}
			return a.awaitClosed(ctx, id, timeout)
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "only send the stop signal, do not wait for the campaign to stop")
	cmd.Flags().DurationVar(&timeout, "timeout", DefaultStopTimeout, "how long to wait for the campaign to stop")
	return cmd
}

// stopPoll is how often `stop` looks whether the campaign has closed.
const stopPoll = 200 * time.Millisecond

// awaitClosed waits until campaign id's workflow is no longer running, at
// most timeout, and reports how it ended.
func (a *App) awaitClosed(ctx context.Context, id string, timeout time.Duration) error {
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(min(a.Interval, stopPoll))
	defer tick.Stop()
	var lastErr error
	for {
		ex, err := c.Describe(wctx, id)
		if err == nil && ex.Status != StatusRunning {
			fmt.Fprintf(a.Out, "campaign %s %s (%d pages fetched), %s after the stop signal\n",
				id, stateOf(ex.Status, ex.State), ex.PagesFetched, time.Since(began).Round(10*time.Millisecond))
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-tick.C:
			continue
		case <-wctx.Done():
		}
		if ctx.Err() != nil {
			return &exitError{code: ExitInterrupted,
				msg: fmt.Sprintf("stopped waiting; campaign %s has the stop signal and is stopping (`starter status %s`)", id, id)}
		}
		msg := fmt.Sprintf("campaign %s has the stop signal but has not stopped within %s; is a worker running on task queue %s? `starter status %s` shows what it is doing, and it stops once a worker runs it",
			id, timeout, workflows.TaskQueue, id)
		if lastErr != nil {
			msg += fmt.Sprintf(" (last error: %v)", lastErr)
		}
		return failf("%s", msg)
	}
}

func (a *App) restartCommand() *cobra.Command {
	var fetcher int
	cmd := &cobra.Command{
		Use:   "restart ID --fetcher K",
		Short: "Restart one fetcher of a campaign's fleet, by index",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if fetcher < 0 {
				return usagef("--fetcher %d: must be 0 or more", fetcher)
			}
			if err := a.signal(cmd.Context(), id, workflows.SignalRestart, workflows.RestartSignal{Fetcher: fetcher}); err != nil {
				return err
			}
			fmt.Fprintf(a.Out, "sent restart of fetcher %d to campaign %s\n", fetcher, id)
			return nil
		},
	}
	cmd.Flags().IntVar(&fetcher, "fetcher", -1, "index of the fetcher to restart (0-based, as `starter status` shows)")
	_ = cmd.MarkFlagRequired("fetcher")
	return cmd
}

// signal sends a signal to a running campaign, saying which of "no such
// campaign" and "it has ended" applies when the server refuses.
func (a *App) signal(ctx context.Context, id, name string, arg any) error {
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	err = c.Signal(ctx, id, name, arg)
	if errors.Is(err, ErrNotFound) {
		return a.notRunning(ctx, c, id)
	}
	if err != nil {
		return failf("cannot signal campaign %s: %v", id, err)
	}
	return nil
}

// ReleaseFunc removes a campaign's queues from the schedulers;
// session.Client.ReleaseCampaign in production.
type ReleaseFunc func(ctx context.Context, addrs []string, token, id string) error

// releaseEnded finishes what a campaign that ended without closing left in
// the frontier: Terminate runs no workflow code, a failed campaign keeps
// its queues for inspection, and a completed one whose Close could not
// reach every scheduler left its queues and marks there
// (Status.CloseError). `stop` on such a campaign removes them. done
// reports that it did.
func (a *App) releaseEnded(ctx context.Context, id string) (done bool, err error) {
	if a.Release == nil {
		return false, nil
	}
	c, err := a.temporal(ctx)
	if err != nil {
		return false, nil
	}
	ex, err := c.Describe(ctx, id)
	if err != nil {
		return false, nil
	}
	how := "without closing"
	switch ex.Status {
	case StatusTerminated, StatusFailed:
	case StatusCompleted:
		var st workflows.Status
		if err := c.Result(ctx, id, &st); err != nil || st.CloseError == "" {
			return false, nil
		}
		how = "with a close that failed (" + oneLine(st.CloseError) + ")"
	default:
		return false, nil
	}
	if err := a.Release(ctx, a.Env.Schedulers, a.Env.Token, ex.FrontierKey()); err != nil {
		return true, failf("campaign %s ended (%s) %s; removing its queues failed: %v", id, ex.Status, how, err)
	}
	fmt.Fprintf(a.Out, "campaign %s had ended (%s) %s; its queues are removed from the frontier\n", id, ex.Status, how)
	return true, nil
}

// notRunning explains why a campaign takes no control: unknown or ended.
func (a *App) notRunning(ctx context.Context, c Campaigns, id string) error {
	ex, err := c.Describe(ctx, id)
	if err != nil || ex.Status == StatusRunning {
		return failf("no campaign %s", id)
	}
	return failf("campaign %s has ended (%s); start it again with `starter start --id %s ...`", id, stateOf(ex.Status, ex.State), id)
}

// updateTimeout bounds a scale: an update needs a worker to run the
// workflow, and without one it would wait forever.
const updateTimeout = 30 * time.Second

func (a *App) scaleCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "scale ID N",
		Short: "Set the number of fetchers of a running campaign",
		Args:  exactArgs("ID", "N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			n, err := strconv.Atoi(args[1])
			if err != nil {
				return usagef("N %q: must be a whole number of fetchers", args[1])
			}
			var res workflows.ScaleResult
			if err := a.update(cmd.Context(), id, updateSpec{what: "scale", refused: "scale rejected", within: updateTimeout},
				workflows.UpdateScale, workflows.ScaleRequest{Fetchers: n}, &res); err != nil {
				return err
			}
			fmt.Fprintf(a.Out, "campaign %s: %s\n", id, scaleText(res, n))
			return nil
		},
	}
}

// updateSpec says how a command's Update is told in its errors: what it
// is ("the scale"), the words before the workflow's refusal, and how long
// it is waited for.
type updateSpec struct {
	what, refused string
	within        time.Duration
}

// update sends Update name with arg to campaign id and decodes its result
// into result, saying which of "no worker answered", "the workflow
// refused" (in its own words), "no such campaign" and "it has ended"
// applies when it does not complete.
func (a *App) update(ctx context.Context, id string, spec updateSpec, name string, arg, result any) error {
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	uctx, cancel := context.WithTimeout(ctx, spec.within)
	defer cancel()
	err = c.Update(uctx, id, name, arg, result)
	var rejected *UpdateRejectedError
	switch {
	case errors.Is(uctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil:
		return failf("campaign %s did not answer the %s within %s; is a worker running on task queue %s?", id, spec.what, spec.within, workflows.TaskQueue)
	case errors.As(err, &rejected):
		return failf("%s: %s", spec.refused, rejected.Message)
	case errors.Is(err, ErrNotFound):
		return a.notRunning(ctx, c, id)
	case err != nil:
		return failf("cannot send the %s to campaign %s: %v", spec.what, id, err)
	}
	return nil
}
