package devstack

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
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

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
