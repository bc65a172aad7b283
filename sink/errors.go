package sink

import "errors"

// Sentinel errors of the sinks. Store wraps them with the sink and the page
// URL; test with errors.Is.
var (
	// ErrClosed is returned by Store after Close.
	ErrClosed = errors.New("sink closed")
	// ErrUnreachable means the service behind a sink (Kafka, PostgreSQL) did
	// not answer; the message names the address tried and how to start it.
	ErrUnreachable = errors.New("sink service unreachable")
	// ErrRecordTooLarge means a page does not fit the sink's record limit
	// (Kafka: the writer's batch bytes and the broker's message.max.bytes).
	// Retrying will not help; the caller should record the URL as failed.
	ErrRecordTooLarge = errors.New("record too large for the sink")
	// ErrRejected means the service refused this page for good (PostgreSQL
	// rejected its row on a healthy connection); retrying will not help.
	ErrRejected = errors.New("page rejected by the sink")
	// ErrTopicMissing means a Kafka sink's topic does not exist and its URI
	// does not ask to create it (create=true). Retrying will not help.
	ErrTopicMissing = errors.New("kafka topic does not exist")
)

// Permanent reports whether err says the sink will never store the page
// (ErrRecordTooLarge, ErrRejected): the caller stops retrying it, and the
// scheduler dead-letters the URL with the sink's reason after MaxAttempts.
func Permanent(err error) bool {
	return errors.Is(err, ErrRecordTooLarge) || errors.Is(err, ErrRejected)
}
