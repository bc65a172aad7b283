package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/workflows"
)

// ExitCode is the exit code of `start --wait` for a campaign's final state:
// 0 completed (also when --max-pages or --max-duration ended it), 1 failed
// or stopped.
func ExitCode(state string) int {
	if state == campaign.StateCompleted {
		return ExitOK
	}
	return ExitFailure
}

// wait blocks until the campaign ends, showing progress on a.Err: one line
// rewritten in place on a terminal, a line every few seconds otherwise.
func (a *App) wait(ctx context.Context, id string, asJSON bool) error {
	tty := isTerminal(a.Err)
	every := a.Interval
	if !tty {
		every = max(a.Interval, 5*time.Second)
	}
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	var (
		lastPages  int64
		lastAt     time.Time
		lastPrint  time.Time
		transient  int
		printedAny bool
		// shownFailure: the failure last printed on a line of its own
		shownFailure string
	)
	for {
		v, err := a.view(ctx, id)
		if ctx.Err() != nil {
			if tty && printedAny {
				fmt.Fprintln(a.Err)
			}
			return &exitError{code: ExitInterrupted,
				msg: fmt.Sprintf("stopped waiting; campaign %s keeps running (`starter stop %s` ends it)", id, id)}
		}
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		if err != nil {
			// A hiccup of Temporal's is not the campaign's end: keep waiting.
			if transient++; transient > 30 {
				return failf("lost track of campaign %s: %v", id, err)
			}
		} else {
			transient = 0
			now := a.Now()
			rate := 0.0
			if !lastAt.IsZero() && now.After(lastAt) {
				rate = float64(v.PagesFetched-lastPages) / now.Sub(lastAt).Seconds()
			}
			lastPages, lastAt = v.PagesFetched, now
			if v.Closed() {
				if tty && printedAny {
					fmt.Fprintln(a.Err)
				}
				return a.finish(v, asJSON)
			}
			if tty {
				if key := failureKey(v.Failure); key != "" && key != shownFailure {
					// On a line of its own, so it stays on screen.
					fmt.Fprintf(a.Err, "\r\033[K%s  FAILING: %s\n", now.Format(time.TimeOnly), failureLine(v.Failure, now))
					shownFailure = key
				}
				fmt.Fprintf(a.Err, "\r\033[K%s", shortProgressLine(now, v, rate))
				printedAny = true
			} else if now.Sub(lastPrint) >= every {
				fmt.Fprintln(a.Err, progressLine(now, v, rate))
				lastPrint = now
			}
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// progressLine is one line of --wait's progress.
func progressLine(now time.Time, v View, rate float64) string {
	line := fmt.Sprintf("%s  %s: %d pages, %d failed, %d queued, %d in flight, %.1f pages/s, fetchers %d/%d",
		now.Format(time.TimeOnly), v.State, v.PagesFetched, v.PagesFailed, v.URLsQueued, v.URLsInFlight,
		rate, v.FetchersActive, v.FetchersDesired)
	if v.StatusError != "" {
		line += " (the workflow does not answer: is a worker running?)"
	}
	if f := failureLine(v.Failure, now); f != "" {
		line += "; FAILING: " + f
	}
	return line
}

// shortProgressLine is progressLine for a terminal, where the line is
// rewritten in place and must not wrap: a failure is named by its reason
// only, its words having been printed on a line of their own.
func shortProgressLine(now time.Time, v View, rate float64) string {
	f := v.Failure
	v.Failure = nil
	line := progressLine(now, v, rate)
	if f != nil && f.Consecutive > 0 {
		line += fmt.Sprintf("; FAILING %d/%d: %s", f.Failing, f.Desired, f.Reason)
	}
	return line
}

// failureKey changes when a new failure streak begins or its reason does.
func failureKey(f *workflows.FleetFailure) string {
	if f == nil || f.Consecutive == 0 {
		return ""
	}
	return f.Since.String() + "\x00" + f.Text()
}

// finish reports a campaign that ended and turns its state into the exit
// code. A campaign that did not complete is a failure: its line goes to
// stderr.
func (a *App) finish(v View, asJSON bool) error {
	took := ""
	if v.CloseTime != nil {
		took = " in " + v.CloseTime.Sub(v.StartTime).Round(time.Second).String()
	}
	line := fmt.Sprintf("campaign %s %s%s: %d pages fetched, %d failed", v.ID, v.State, took, v.PagesFetched, v.PagesFailed)
	if v.Reason != "" {
		line += " (" + v.Reason + ")"
	}
	code := ExitCode(v.State)
	if asJSON {
		if err := writeJSON(a.Out, v); err != nil {
			return err
		}
	} else if code == ExitOK {
		fmt.Fprintln(a.Out, line)
	}
	if code != ExitOK {
		return &exitError{code: code, msg: line}
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
