// Package temporalmetrics puts the Temporal SDK's metrics (temporal_*) on a
// drover process's Prometheus registry, through
// go.temporal.io/sdk/contrib/tally and tally's Prometheus reporter.
package temporalmetrics

import (
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/uber-go/tally/v4"
	tallyprom "github.com/uber-go/tally/v4/prometheus"
	"go.temporal.io/sdk/client"
	contribtally "go.temporal.io/sdk/contrib/tally"
)

// temporalBuckets are the buckets of the SDK's latencies (seconds): task
// latencies run from milliseconds (a workflow task) to minutes (a poll, an
// activity).
var temporalBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// TemporalHandler returns a Temporal client MetricsHandler whose metrics
// (temporal_*, with the SDK's own labels: namespace, task queue, workflow
// and activity type) are registered on reg, for client.Options. Timers
// are Prometheus histograms in seconds. Close the io.Closer when the
// client is closed; it flushes the last values.
func TemporalHandler(reg *prometheus.Registry, log *slog.Logger) (client.MetricsHandler, io.Closer, error) {
	if log == nil {
		log = slog.Default()
	}
	r := tallyprom.NewReporter(tallyprom.Options{
		Registerer:              reg,
		DefaultTimerType:        tallyprom.HistogramTimerType,
		DefaultHistogramBuckets: temporalBuckets,
		// The default panics; a metric the SDK registers twice with other
		// labels must not take the worker down.
		OnRegisterError: func(err error) { log.Warn("temporal metrics: register", "err", err) },
	})
	scope, closer := tally.NewRootScope(tally.ScopeOptions{
		CachedReporter:  r,
		Separator:       tallyprom.DefaultSeparator,
		SanitizeOptions: &contribtally.PrometheusSanitizeOptions,
	}, time.Second)
	if scope == nil {
		return nil, nil, fmt.Errorf("temporal metrics: no tally scope")
	}
	return contribtally.NewMetricsHandler(contribtally.NewPrometheusNamingScope(scope)), closer, nil
}
