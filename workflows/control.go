package workflows

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// Control signals and their order.
//
// Temporal keeps signals in history order, but the Go SDK does not hand that
// order to workflow code across signal names: all signals of one workflow
// task are put into their channels' buffers before any workflow code runs,
// and coroutines and selector cases then run in creation order
// (TestSDKDoesNotKeepOrderAcrossSignalChannels shows pause+resume and
// resume+pause observed alike: pause, resume, pause sent at once may end
// "running"). Signals that arrive in different workflow tasks are seen in
// their order.
//
// So the workflow reads every control channel at each wake-up and treats
// what it drained as one batch whose inner order is unknown, resolved by a
// rule that does not depend on the sender:
//
//  1. stop in a batch wins over everything else in it;
//  2. between pause and resume, when every one of them carries a sequence
//     number (the starter stamps Seq with its clock), the latest wins;
//     otherwise pause wins over resume (a crawl that stays paused by
//     mistake costs an operator one more resume; one that runs by mistake
//     loads sites that someone wanted left alone), so pause, resume, pause
//     ends paused;
//  3. restarts apply, in their own order, after the state is settled, and
//     only to fetchers that are meant to run.
//
// pause and resume are idempotent: pausing a paused campaign is a no-op.

// controlBatch is what one wake-up drained from the control channels.
type controlBatch struct {
	pause, resume, stop bool
	reason              string
	restarts            []int
	// pauseSeq, resumeSeq: the latest sequence numbers; unsequenced is set
	// when a pause or resume came without one.
	pauseSeq, resumeSeq int64
	unsequenced         bool
}

// resumeWins reports whether a batch holding both pause and resume ends
// running: only when all of them were sequenced and a resume came last.
func (b controlBatch) resumeWins() bool {
	return b.pause && b.resume && !b.unsequenced && b.resumeSeq > b.pauseSeq
}

func (b controlBatch) empty() bool {
	return !b.pause && !b.resume && !b.stop && len(b.restarts) == 0
}

// controls holds the control signal channels.
type controls struct {
	pause, resume, stop, restart workflow.ReceiveChannel
}

func newControls(ctx workflow.Context) controls {
	return controls{
		pause:   workflow.GetSignalChannel(ctx, SignalPause),
		resume:  workflow.GetSignalChannel(ctx, SignalResume),
		stop:    workflow.GetSignalChannel(ctx, SignalStop),
		restart: workflow.GetSignalChannel(ctx, SignalRestart),
	}
}

// addTo makes sel wake on any control signal and call f with everything the
// control channels hold at that moment.
func (c controls) addTo(ctx workflow.Context, sel workflow.Selector, f func(controlBatch)) {
	for _, ch := range []workflow.ReceiveChannel{c.pause, c.resume, c.stop, c.restart} {
		sel.AddReceive(ch, func(workflow.ReceiveChannel, bool) { f(c.drain(ctx)) })
	}
}

// drain empties every control channel without blocking. Payloads are read
// as raw values and decoded here, so that a malformed payload (say
// `--input true` on pause) still pauses instead of being dropped by the SDK
// as a corrupt signal.
func (c controls) drain(ctx workflow.Context) controlBatch {
	var b controlBatch
	for raw, ok := receiveRaw(c.stop); ok; raw, ok = receiveRaw(c.stop) {
		var s StopSignal
		decodeSignal(ctx, SignalStop, raw, &s)
		b.stop = true
		if s.Reason != "" {
			b.reason = s.Reason
		}
	}
	for raw, ok := receiveRaw(c.pause); ok; raw, ok = receiveRaw(c.pause) {
		var p PauseSignal
		decodeSignal(ctx, SignalPause, raw, &p)
		b.pause = true
		if p.Reason != "" && !b.stop {
			b.reason = p.Reason
		}
		b.pauseSeq = max(b.pauseSeq, p.Seq)
		b.unsequenced = b.unsequenced || p.Seq == 0
	}
	for raw, ok := receiveRaw(c.resume); ok; raw, ok = receiveRaw(c.resume) {
		var rs ResumeSignal
		decodeSignal(ctx, SignalResume, raw, &rs)
		b.resume = true
		b.resumeSeq = max(b.resumeSeq, rs.Seq)
		b.unsequenced = b.unsequenced || rs.Seq == 0
	}
	for raw, ok := receiveRaw(c.restart); ok; raw, ok = receiveRaw(c.restart) {
		var r RestartSignal
		if raw.Payload() == nil || !decodeSignal(ctx, SignalRestart, raw, &r) {
			workflow.GetLogger(ctx).Warn(`restart signal ignored: it must name a fetcher, as {"fetcher": K}`)
			continue
		}
		b.restarts = append(b.restarts, r.Fetcher)
	}
	return b
}

// receiveRaw receives one signal without blocking, its payload undecoded.
func receiveRaw(ch workflow.ReceiveChannel) (converter.RawValue, bool) {
	var raw converter.RawValue
	ok := ch.ReceiveAsync(&raw)
	return raw, ok
}

// decodeSignal decodes raw into v, logging (not failing) on a bad payload.
// An absent payload leaves v at its zero value.
func decodeSignal(ctx workflow.Context, name string, raw converter.RawValue, v any) bool {
	if raw.Payload() == nil {
		return true
	}
	if err := converter.GetDefaultDataConverter().FromPayload(raw.Payload(), v); err != nil {
		workflow.GetLogger(ctx).Warn("signal payload not understood", "signal", name, "err", err)
		return false
	}
	return true
}
