// Package systest holds drover's system tests: whole crawls through the
// real services (a Temporal dev server, RabbitMQ, the Kafka-protocol
// broker, PostgreSQL), with workers and schedulers in process (package
// node's wiring) or as processes, faults injected mid-crawl, and every
// count taken from the outside, by the test web's server. The tests that
// take minutes call testenv.Long and run in `make test-long`; the
// RabbitMQ cluster's in `make test-cluster` (docs/testing.md).
package systest
