package devstack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/workflows"
)

// startTemporal starts a headless in-memory dev server for a test, or skips
// the test under -short or when bin/temporal is not installed.
func startTemporal(t *testing.T, opts TemporalOptions) *Temporal {
	t.Helper()
	testenv.NeedsTemporal(t)
	if err := EnsureTemporalBinary(); errors.Is(err, ErrTemporalBinaryMissing) {
		t.Skipf("skipping: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	tmp, err := StartTemporal(ctx, opts)
	require.NoError(t, err)
	t.Logf("StartTemporal took %s (address %s, UI %q)", time.Since(start), tmp.Address(), tmp.UIURL())
	t.Cleanup(func() { require.NoError(t, tmp.Stop()) })
	return tmp
}

func TestStartTemporalRegistersSearchAttributes(t *testing.T) {
	tmp := startTemporal(t, TemporalOptions{UIPort: -1})
	require.Empty(t, tmp.UIURL())

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tmp.Client().OperatorService().ListSearchAttributes(ctx,
		&operatorservice.ListSearchAttributesRequest{Namespace: tmp.Namespace()})
	require.NoError(t, err)
	require.Equal(t, enums.INDEXED_VALUE_TYPE_KEYWORD, resp.CustomAttributes[workflows.SearchAttributeState])
	require.Equal(t, enums.INDEXED_VALUE_TYPE_INT, resp.CustomAttributes[workflows.SearchAttributePages])

	require.NoError(t, CheckTemporal(ctx, tmp.Address()))
}

func TestStartTemporalServesUIAndPersists(t *testing.T) {
	db := t.TempDir() + "/data/temporal.db"
	tmp := startTemporal(t, TemporalOptions{DBFilename: db})
	require.NotEmpty(t, tmp.UIURL())
	await.For(t, 20*time.Second, 200*time.Millisecond, "the web UI at "+tmp.UIURL(), func() error {
		return CheckHTTP(context.Background(), tmp.UIURL())
	})
	require.FileExists(t, db)
}

func TestStartTemporalPortTaken(t *testing.T) {
	if err := EnsureTemporalBinary(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	_, err = StartTemporal(context.Background(), TemporalOptions{Port: ln.Addr().(*net.TCPAddr).Port, UIPort: -1})
	var pe *PortInUseError
	require.ErrorAs(t, err, &pe)
	require.Contains(t, err.Error(), "set TEMPORAL_ADDRESS")
}

func TestFindTemporalBinaryMissing(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(dir+"/go.mod", "module x\n"))
	_, err := FindTemporalBinary(dir)
	require.ErrorIs(t, err, ErrTemporalBinaryMissing)
	require.Contains(t, err.Error(), "make bin/temporal")
}

func TestCheckTemporalUnreachable(t *testing.T) {
	addr := freeAddr(t)
	err := CheckTemporal(context.Background(), addr)
	require.Error(t, err)
	require.Contains(t, err.Error(), "Temporal at "+addr+" unreachable")
	require.Contains(t, err.Error(), "make dev")
	require.NotContains(t, err.Error(), "\n")
}

// The SDK leaks the server process when the start fails; StartTemporal must not.
func TestStartTemporalTimeoutLeavesNoProcess(t *testing.T) {
	testenv.NeedsTemporal(t) // starts bin/temporal, then gives up on it
	if err := EnsureTemporalBinary(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	bin, err := TemporalBinary()
	require.NoError(t, err)
	port := freeAddr(t)[len("127.0.0.1:"):]
	_, err = StartTemporal(context.Background(), TemporalOptions{
		Port: mustAtoi(t, port), UIPort: -1, StartTimeout: time.Millisecond,
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "starting temporal dev server on 127.0.0.1:"+port)
	require.Empty(t, findProcesses(func(args []string) bool {
		return args[0] == bin && slices.Contains(args, port)
	}))
}

// crashingTemporal writes a script that stands in for the temporal CLI:
// its first crashes runs print a Go panic and exit, the later ones run
// real (when not empty). It returns the script's path and a func that
// counts its runs.
func crashingTemporal(t *testing.T, crashes int, real string) (string, func() int) {
	t.Helper()
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	script := fmt.Sprintf(`#!/bin/sh
echo run >> %[1]q
n=$(wc -l < %[1]q)
if [ "$n" -le %[2]d ] || [ -z %[3]q ]; then
	echo "time=now level=WARN msg=starting" >&2
	echo "panic: listen tcp 127.0.0.1:1: bind: address already in use" >&2
	echo "goroutine 1 [running]:" >&2
	exit 2
fi
exec %[3]q "$@"
`, runs, crashes, real)
	bin := filepath.Join(dir, "temporal")
	require.NoError(t, os.WriteFile(bin, []byte(script), 0o755))
	return bin, func() int {
		b, err := os.ReadFile(runs)
		require.NoError(t, err)
		return bytes.Count(b, []byte("\n"))
	}
}

// A dev server that crashes while starting is started again at once: the
// crash is seen in its output, not waited out until the start timeout.
func TestStartTemporalAfterACrash(t *testing.T) {
	testenv.NeedsTemporal(t)
	if err := EnsureTemporalBinary(); err != nil {
		t.Skipf("skipping: %v", err)
	}
	real, err := TemporalBinary()
	require.NoError(t, err)
	bin, runs := crashingTemporal(t, 1, real)
	// Were the crash not seen as it happened, the first attempt would dial
	// the dead process until ctx ends, and nothing would start again.
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	tmp, err := StartTemporal(ctx, TemporalOptions{BinaryPath: bin, UIPort: -1})
	require.NoError(t, err)
	defer tmp.Stop()
	require.Equal(t, 2, runs(), "runs of the temporal CLI")
	require.NoError(t, CheckTemporal(context.Background(), tmp.Address()))
}

// A panic as the output's very first line is a crash too.
func TestOutputWriterCrashAtTheStart(t *testing.T) {
	o := newOutputWriter(nil)
	fmt.Fprint(o, "panic: at once\n")
	require.True(t, o.hasCrashed())
}

// A dev server that always crashes is started a bounded number of times,
// and the error carries the panic's message, which comes before its stack.
func TestStartTemporalCrashingGivesUp(t *testing.T) {
	bin, runs := crashingTemporal(t, 100, "")
	_, err := StartTemporal(context.Background(), TemporalOptions{BinaryPath: bin, UIPort: -1, StartTimeout: 45 * time.Second})
	require.Error(t, err)
	require.Contains(t, err.Error(), "it crashed")
	require.Contains(t, err.Error(), "panic: listen tcp 127.0.0.1:1: bind: address already in use")
	require.Equal(t, temporalStartAttempts, runs(), "runs of the temporal CLI")
}

// outputWriter keeps a long output's first and last bytes, and sees a
// crash mark that two writes split, at a line's start only.
func TestOutputWriterKeepsHeadAndTail(t *testing.T) {
	var fwd bytes.Buffer
	o := newOutputWriter(&fwd)
	fmt.Fprint(o, "first line\n")
	for range 2 * outputKeep / 10 {
		fmt.Fprint(o, "filler...\n")
	}
	fmt.Fprint(o, "level=ERROR msg=\"recovered panic: x\"\n")
	require.False(t, o.hasCrashed(), "a log line that mentions a panic is no crash")
	fmt.Fprint(o, "last line\npan")
	require.False(t, o.hasCrashed())
	fmt.Fprint(o, "ic: boom\n")
	require.True(t, o.hasCrashed())
	select {
	case <-o.crashed:
	default:
		require.FailNow(t, "crashed is not closed")
	}
	out := o.String()
	require.True(t, strings.HasPrefix(out, "first line\n"), "the start is kept")
	require.True(t, strings.HasSuffix(out, "last line\npanic: boom\n"), "the end is kept")
	require.Contains(t, out, "\n[...]\n")
	require.Less(t, len(out), 2*outputKeep+16)
	require.Equal(t, fwd.Len(), len("first line\n")+2*outputKeep/10*10+len("level=ERROR msg=\"recovered panic: x\"\n")+len("last line\npanic: boom\n"), "everything is forwarded")
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
