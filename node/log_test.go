package node

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQuietCancels(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(QuietCancels(slog.NewTextHandler(&buf, nil))).With("Namespace", "default")
	log.Error("Activity error.", "ActivityType", "FetchSession", "Error", errors.New("canceled"))
	log.Warn("RecordActivityHeartbeat with error", "Error", "canceled")
	log.Error("Activity error.", "ActivityType", "FetchSession", "Error", errors.New("scheduler 127.0.0.1:7420 unreachable"))
	out := buf.String()
	assert.NotContains(t, out, "canceled", "a cancellation was logged")
	assert.Contains(t, out, "unreachable", "a real activity error was dropped")
}
