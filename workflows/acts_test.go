package workflows

import (
	"context"
	"errors"

	"github.com/drover-crawl/drover/seedfile"
)

// stubActivities has the activities' names (its method names, as
// RegisterActivity registers them) and signatures; the tests mock every
// call (env.OnActivity). The real ones (package activities) import this
// package, so its tests cannot import them; node's compile-time check
// (temporalnode.Activities) holds them to the same signatures.
type stubActivities struct{}

var errNotMocked = errors.New("activity not mocked by the test")

func (*stubActivities) Seed(context.Context, SeedInput) (SeedResult, error) {
	return SeedResult{}, errNotMocked
}

func (*stubActivities) Monitor(context.Context, MonitorInput) (MonitorResult, error) {
	return MonitorResult{}, errNotMocked
}

func (*stubActivities) Close(context.Context, CloseInput) (CloseResult, error) {
	return CloseResult{}, errNotMocked
}

func (*stubActivities) Notify(context.Context, NotifyInput) error { return errNotMocked }

func (*stubActivities) EndSessions(context.Context, EndSessionsInput) (EndSessionsResult, error) {
	return EndSessionsResult{}, errNotMocked
}

func (*stubActivities) FetchSession(context.Context, FetchSessionInput) (SessionCounters, error) {
	return SessionCounters{}, errNotMocked
}

// acts names the activities in the tests' mocks.
var acts *stubActivities

func (*stubActivities) SetRules(context.Context, RulesInput) (RulesOutput, error) {
	return RulesOutput{}, errNotMocked
}

func (*stubActivities) SeedFile(context.Context, SeedFileInput) (seedfile.Counts, error) {
	return seedfile.Counts{}, errNotMocked
}
