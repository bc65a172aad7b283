package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestQuietCancels(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(QuietCancels(slog.NewTextHandler(&buf, nil))).With("Namespace", "default")
	log.Error("Activity error.", "ActivityType", "FetchSession", "Error", errors.New("canceled"))
	log.Warn("RecordActivityHeartbeat with error", "Error", "canceled")
	log.Error("Activity error.", "ActivityType", "FetchSession", "Error", errors.New("scheduler 127.0.0.1:7420 unreachable"))
	out := buf.String()
	if strings.Contains(out, "canceled") {
		t.Errorf("a cancellation was logged:\n%s", out)
	}
	if !strings.Contains(out, "unreachable") {
		t.Errorf("a real activity error was dropped:\n%s", out)
	}
}
