package node

import (
	"context"
	"log/slog"
	"strings"
)

// QuietCancels wraps a slog handler for the Temporal SDK's logger: it drops
// the SDK's reports of activities ended by a cancellation ("Activity
// error." at ERROR, "RecordActivityHeartbeat with error" at WARN, with
// Error=canceled), which every pause, stop and scale-down produces for
// every fetcher: expected, and alarming in an operator's log.
func QuietCancels(h slog.Handler) slog.Handler { return quietCancels{h} }

type quietCancels struct{ slog.Handler }

func (q quietCancels) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "Activity error." || r.Message == "RecordActivityHeartbeat with error" {
		canceled := false
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "Error" && strings.Contains(a.Value.String(), "canceled") {
				canceled = true
				return false
			}
			return true
		})
		if canceled {
			return nil
		}
	}
	return q.Handler.Handle(ctx, r)
}

func (q quietCancels) WithAttrs(as []slog.Attr) slog.Handler {
	return quietCancels{q.Handler.WithAttrs(as)}
}

func (q quietCancels) WithGroup(name string) slog.Handler {
	return quietCancels{q.Handler.WithGroup(name)}
}
