//go:build linux

// Linux only: the test reads /proc/PID/task/TID/syscall.

package systest_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/internal/await"
)

// TestWorkerKilledMidFsyncWARC kills a worker while its WARC sink is
// making a batch durable: a thread of the worker is in fsync on its WARC
// file (/proc/PID/task/TID/syscall names the call and its fd), so the
// batch's pages are written and none of their Stores has returned. The
// worker is stopped while that thread is still in the call, then killed
// (stoppedInFsync). After the campaign the dead worker's
// file holds pages that were fetched again (their outcome never reached
// the scheduler), and every page is in some file, byte for byte: the dead
// worker's copy or the survivor's.
func TestWorkerKilledMidFsyncWARC(t *testing.T) {
	dir := t.TempDir() // on a disk: an fsync takes long enough to be seen
	k := startSinkKill(t, "warckill", 86, "warc:"+dir, func(string) []string { return nil })
	k.awaitUnderWay()

	var victim, file string
	watch := time.Now()
	await.For(t, 30*time.Second, time.Millisecond, "a worker in fsync on its WARC file", func() error {
		for id, p := range k.procs {
			f, err := stoppedInFsync(p.PID(), dir)
			if err != nil {
				return err
			}
			if f != "" {
				victim, file = id, f
				k.kill(id)
				return nil
			}
		}
		require.NotEmpty(t, k.web.Missing(), "every page was requested before a worker was seen in fsync")
		return errors.New("no worker thread in fsync on a WARC file")
	})
	t.Logf("killed %s in fsync on %s, seen after %s of watching", victim, filepath.Base(file), time.Since(watch).Round(time.Millisecond))
	require.NotEmpty(t, k.web.Missing(), "every page had been requested at the kill")

	dups := k.finish()
	recs := readWARCDir(t, dir)
	got := map[string][][]byte{}
	var refetched []string
	for _, r := range recs {
		got[r.uri] = append(got[r.uri], r.body)
		if r.file == file && dups[r.uri] > 0 {
			refetched = append(refetched, r.uri)
		}
	}
	t.Logf("%s's file holds %d pages fetched again after the kill, e.g. %v", victim, len(refetched), refetched[:min(3, len(refetched))])
	assert.NotEmpty(t, refetched, "no page in %s's file %s was fetched again: the kill hit no page in flight", victim, filepath.Base(file))
	checkHeld(t, k.web, "the WARC files", got)
}

// stoppedInFsync looks for a thread of process pid in fsync or fdatasync
// on a .warc.gz file in dir. When it finds one it stops the process
// (SIGSTOP) and looks again: a thread still in that call, in
// uninterruptible sleep, had not returned from it when the stop came, and
// a stopped thread runs none of its own code once the call returns, so
// the Stores waiting on that fsync cannot return before the caller kills
// the process. It returns the file then, the process left stopped for
// the caller to kill; otherwise it lets the process go on (SIGCONT) and
// returns "". Reading the call and killing at once left a window: on a
// busy machine the fsync could return, and its Stores with it, before
// the kill came.
func stoppedInFsync(pid int, dir string) (string, error) {
	tid, file, err := warcInFsync(pid, dir, "")
	if err != nil || file == "" {
		return "", err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return "", err
	}
	still, again, err := warcInFsync(pid, dir, tid)
	if err == nil && still == tid && again == file && threadState(pid, tid) == 'D' {
		return file, nil
	}
	return "", errors.Join(err, syscall.Kill(pid, syscall.SIGCONT))
}

// threadState is the state letter of thread tid of process pid (R, S, D,
// T, ...), or 0 when it cannot be read.
func threadState(pid int, tid string) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, tid))
	if err != nil {
		return 0
	}
	// "TID (comm) STATE ...": the command may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}

// warcInFsync returns a thread of process pid in fsync or fdatasync on a
// .warc.gz file in dir, and the file, or "" when none is. When only is
// not empty it looks at that thread alone.
func warcInFsync(pid int, dir, only string) (tid, file string, err error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return "", "", err
	}
	for _, task := range tasks {
		if only != "" && task.Name() != only {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, task.Name()))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) < 2 {
			continue // "running", or no syscall
		}
		nr, err := strconv.Atoi(f[0])
		if err != nil || (nr != syscall.SYS_FSYNC && nr != syscall.SYS_FDATASYNC) {
			continue
		}
		fd, err := strconv.ParseInt(f[1], 0, 64)
		if err != nil {
			continue
		}
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
		if err == nil && filepath.Dir(target) == dir && strings.HasSuffix(target, ".warc.gz") {
			return task.Name(), target, nil
		}
	}
	return "", "", nil
}

// warcPage is a response record read back from a WARC file: its target
// URI and payload (the block after the HTTP head).
type warcPage struct {
	file string
	uri  string
	body []byte
}

// readWARCDir reads every record of every file in dir with gowarc, failing
// the test on a record that does not parse or validate, and returns the
// response records.
func readWARCDir(t *testing.T, dir string) []warcPage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "no WARC file in %s", dir)
	var out []warcPage
	for _, f := range files {
		r, err := gowarc.NewWarcFileReader(f, 0)
		require.NoError(t, err)
		for n := 0; ; n++ {
			rec, _, val, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, "%s record %d", filepath.Base(f), n)
			assert.True(t, val.Valid(), "%s record %d: %v", filepath.Base(f), n, val)
			if rec.Type() == gowarc.Response {
				raw, err := rec.Block().RawBytes()
				require.NoError(t, err)
				block, err := io.ReadAll(raw)
				require.NoError(t, err)
				_, body, ok := bytes.Cut(block, []byte("\r\n\r\n"))
				require.True(t, ok, "%s record %d: a response block without an HTTP head", filepath.Base(f), n)
				out = append(out, warcPage{file: f, uri: rec.WarcHeader().Get(gowarc.WarcTargetURI), body: body})
			}
			rec.Close()
		}
		r.Close()
	}
	return out
}
