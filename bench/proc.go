package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux build that matters here.
const clockTicks = 100

// selfUsage returns this process's CPU time (user + system) and peak RSS.
func selfUsage() (cpu time.Duration, maxRSS int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return cpu, ru.Maxrss * 1024 // Linux reports kilobytes
}

// procCPU returns the CPU time (utime + stime) of another process.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'. utime and stime are fields 14 and 15 of the whole line.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// procHWM returns the peak resident set (VmHWM) of another process.
func procHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmHWM", pid)
}

// findProc returns the first process whose argument list matches, or 0.
func findProc(match func(args []string) bool) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/cmdline")
		if err != nil || len(b) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if match(args) {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	return 0
}

// rabbitPID finds the RabbitMQ broker (Erlang's beam.smp), or 0.
func rabbitPID() int {
	return findProc(func(args []string) bool { return strings.HasSuffix(args[0], "beam.smp") })
}

// temporalPID finds the Temporal dev server listening on port, or 0: other
// dev servers (other test runs) may be alive on the same machine.
func temporalPID(port string) int {
	return findProc(func(args []string) bool {
		if !strings.Contains(args[0], "temporal") || !slices.Contains(args, "start-dev") {
			return false
		}
		for i, a := range args[:len(args)-1] {
			if a == "--port" && args[i+1] == port {
				return true
			}
		}
		return false
	})
}

// otherProc samples another process's CPU time, for a delta over a run.
type otherProc struct {
	pid   int
	start time.Duration
	kern  Kernel
}

func sampleProc(pid int) otherProc {
	if pid == 0 {
		return otherProc{}
	}
	c, _ := procCPU(pid)
	return otherProc{pid: pid, start: c, kern: procKernel(pid)}
}

// Kernel counts a process's entries into the kernel: its read and write
// syscalls (/proc/PID/io syscr and syscw: read, write and their vector
// and positional forms, not futex, epoll or nanosleep) and its context
// switches (every thread's voluntary and involuntary ones, from
// /proc/PID/task/*/status; a thread that ended is not counted). On a
// virtual machine where a syscall or a switch costs much (PVM here), they
// say where the kernel's share of the CPU comes from.
type Kernel struct {
	RW       int64 `json:"rw_syscalls"`
	Switches int64 `json:"switches"`
}

func procKernel(pid int) Kernel {
	k := Kernel{RW: sumFields(fmt.Sprintf("/proc/%d/io", pid), func(name string) bool { return name == "syscr" || name == "syscw" })}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*/status", pid))
	for _, t := range tasks {
		k.Switches += sumFields(t, func(name string) bool { return strings.HasSuffix(name, "ctxt_switches") })
	}
	return k
}

// sumFields adds up the numeric "name: value" lines of a /proc file whose
// name match says to count; a file that cannot be read counts 0.
func sumFields(path string, match func(name string) bool) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	var sum int64
	for line := range strings.Lines(string(b)) {
		name, v, ok := strings.Cut(line, ":")
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); ok && err == nil && match(name) {
			sum += n
		}
	}
	return sum
}

// kernel returns the kernel entries since sampleProc.
func (p otherProc) kernel() Kernel {
	if p.pid == 0 {
		return Kernel{}
	}
	k := procKernel(p.pid)
	return Kernel{RW: k.RW - p.kern.RW, Switches: k.Switches - p.kern.Switches}
}

// perPage is "R r/w syscalls + S switches per page".
func (k Kernel) perPage(pages int) string {
	if pages <= 0 || k == (Kernel{}) {
		return ""
	}
	return fmt.Sprintf("%.1f r/w syscalls + %.1f switches per page", float64(k.RW)/float64(pages), float64(k.Switches)/float64(pages))
}

// delta returns the CPU time used since sampleProc and the peak RSS so far.
func (p otherProc) delta() (time.Duration, int64) {
	if p.pid == 0 {
		return 0, 0
	}
	c, err := procCPU(p.pid)
	if err != nil {
		return 0, 0
	}
	hwm, _ := procHWM(p.pid)
	return c - p.start, hwm
}
