// Package testenv marks the tests that `make unit` (go test -short) leaves
// to `make test`: those that need a service or a program of the machine,
// and those that take more than a few seconds. Each helper skips the test
// under -short with a one-line reason, and does nothing otherwise: without
// -short a test that needs RabbitMQ still fails when RabbitMQ is down, as
// `make test` wants.
//
// Call one at the top of the test, or in the setup function that every
// test needing the thing calls (a scheduler's, a stack's), so that one
// call covers them all. What stays under -short is pure Go on loopback:
// fakes, test webs, the in-memory Kafka (franz-go's kfake), Temporal's
// test environment on virtual time.
package testenv

import (
	"os"
	"testing"
)

// NeedsRabbitMQ skips t under -short: it uses the machine's RabbitMQ
// (AMQP_URL, amqp://guest:guest@127.0.0.1:5672/ when unset), through a
// scheduler or directly.
func NeedsRabbitMQ(t testing.TB) {
	t.Helper()
	skipShort(t, "needs RabbitMQ (AMQP_URL, default 127.0.0.1:5672)")
}

// NeedsPostgres skips t under -short: it uses the machine's PostgreSQL
// (127.0.0.1:5432, database test, trust auth).
func NeedsPostgres(t testing.TB) {
	t.Helper()
	skipShort(t, "needs PostgreSQL (127.0.0.1:5432, database test)")
}

// NeedsTemporal skips t under -short: it starts a Temporal dev server from
// bin/temporal (`make bin/temporal`), or runs that CLI.
func NeedsTemporal(t testing.TB) {
	t.Helper()
	skipShort(t, "needs a Temporal dev server (bin/temporal)")
}

// NeedsBrowser skips t under -short: it drives a headless Chromium
// (Debian's chromium, or DROVER_CHROMIUM).
func NeedsBrowser(t testing.TB) {
	t.Helper()
	skipShort(t, "needs a browser (chromium)")
}

// NeedsTool skips t under -short: it runs a program of the machine other
// than go, the browser and the services above (prometheus, npm,
// docker-compose, rabbitmq-server...), named by tool.
func NeedsTool(t testing.TB, tool string) {
	t.Helper()
	skipShort(t, "needs "+tool)
}

// NeedsCluster skips t unless DROVER_CLUSTER=1, which `make
// test-cluster` sets: it forms a private three-node RabbitMQ cluster
// (half a minute) and crawls through its faults, two minutes that
// `make test`, bounded by its 20, leaves to that target. `.ci/run` runs
// both.
func NeedsCluster(t testing.TB) {
	t.Helper()
	skipShort(t, "needs a private RabbitMQ cluster")
	if os.Getenv("DROVER_CLUSTER") != "1" {
		t.Skip("a private RabbitMQ cluster: `make test-cluster` runs it (DROVER_CLUSTER=1)")
	}
}

// Long skips t unless DROVER_LONG=1, which `make test-long` sets: a
// test of scale or of a fault that takes a minute or more (a million
// seeds, a 300 MiB body, a scheduler killed in a second run), which
// `make test`, bounded by its 20 minutes, leaves to that target. The
// target finds such tests by this call (the first line of the test, in
// node/); `.ci/run` runs it after `make test`.
func Long(t testing.TB) {
	t.Helper()
	skipShort(t, "long")
	if os.Getenv("DROVER_LONG") != "1" {
		t.Skip("a long test: `make test-long` runs it (DROVER_LONG=1)")
	}
}

// Slow skips t under -short: it takes more than a few seconds (a crawl of
// thousands of pages, a wait on real timeouts, a subprocess built and
// killed), even with every service at hand.
func Slow(t testing.TB) {
	t.Helper()
	skipShort(t, "slow (more than a few seconds)")
}

func skipShort(t testing.TB, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: " + why + "; `make test` runs it")
	}
}
