package devstack

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// PortInUseError says that a TCP address the dev stack wants to listen on is
// taken, and by whom when /proc lets us see it.
type PortInUseError struct {
	// Addr is the address that could not be bound.
	Addr string
	// PID is the process listening on it, or 0 when it could not be found
	// (another user's process, another network namespace, no /proc).
	PID int
	// Command is that process's command line, shortened; empty when PID is 0.
	Command string
	// Env names the environment variable that moves the service elsewhere,
	// for the hint at the end of the message; empty for a generic hint.
	Env string
}

func (e *PortInUseError) Error() string {
	who := "another process"
	if e.PID > 0 {
		who = "pid " + strconv.Itoa(e.PID)
		if e.Command != "" {
			who += " (" + e.Command + ")"
		}
	}
	hint := "stop it or choose another address"
	if e.Env != "" {
		hint = "stop it or set " + e.Env
	}
	return fmt.Sprintf("%s is already in use by %s; %s", e.Addr, who, hint)
}

// CheckPortFree returns nil when addr (host:port) can be listened on now,
// a *PortInUseError naming the owner when something already listens there,
// and another error when addr is malformed or cannot be bound for another
// reason. A port of 0 is always free.
func CheckPortFree(addr string) error {
	return CheckPortFreeFor(addr, "")
}

// CheckPortFreeFor is CheckPortFree whose *PortInUseError ends with
// "stop it or set <env>".
func CheckPortFreeFor(addr, env string) error {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln.Close()
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	pe := &PortInUseError{Addr: addr, Env: env}
	if pid, cmd, ok := listenerOwner(addr); ok {
		pe.PID, pe.Command = pid, cmd
	}
	return pe
}

// FreePort returns a port on ip that nothing listens on and that the kernel
// will not hand out again for about a minute, so that a child process can
// bind it later. A port that was only listened on and closed goes back into
// the pool at once: a test's own outgoing connection could take it as its
// local port in the seconds before the child binds it, and the child then
// fails with "address already in use". So FreePort leaves a connection to
// the port in TIME_WAIT, closed from the listening side: while that lasts,
// Linux neither picks the port for bind(:0) nor for a connection's local
// port, and a listener with SO_REUSEADDR (every Go listener, the Temporal
// and Kafka processes of the dev stack) may still bind it. The temporal
// CLI chooses its own internal ports the same way.
func FreePort(ip string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("choosing a free port on %s: %w", ip, err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, fmt.Errorf("reserving port %d on %s: %w", port, ip, err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		return 0, fmt.Errorf("reserving port %d on %s: %w", port, ip, err)
	}
	// The side that closes first keeps the TIME_WAIT, on the port.
	if err := s.Close(); err != nil {
		return 0, fmt.Errorf("reserving port %d on %s: %w", port, ip, err)
	}
	return port, nil
}

// FreeAddr is FreePort's port on ip as HOST:PORT.
func FreeAddr(ip string) (string, error) {
	port, err := FreePort(ip)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(ip, strconv.Itoa(port)), nil
}

// listenerOwner finds the process holding a LISTEN socket that stops addr
// from being bound: the same port on the same IP or on a wildcard address.
func listenerOwner(addr string) (pid int, cmd string, ok bool) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, "", false
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return 0, "", false
	}
	var want netip.Addr
	if host != "" && host != "localhost" {
		if want, err = netip.ParseAddr(host); err != nil {
			return 0, "", false
		}
		want = want.Unmap()
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for _, s := range listenSockets(f) {
			if s.port != port {
				continue
			}
			ip := s.ip.Unmap()
			if !want.IsValid() || ip.IsUnspecified() || want.IsUnspecified() || ip == want {
				inodes[s.inode] = true
			}
		}
	}
	if len(inodes) == 0 {
		return 0, "", false
	}
	pid = socketOwner(inodes)
	if pid == 0 {
		return 0, "", false
	}
	return pid, commandLine(pid), true
}

type listenSocket struct {
	ip    netip.Addr
	port  int
	inode string
}

// listenSockets parses /proc/net/tcp or tcp6 and keeps the LISTEN sockets.
// Each line reads "sl local rem st ... uid timeout inode"; local is
// HEXIP:HEXPORT with the IP printed as 32-bit words in host byte order.
func listenSockets(path string) []listenSocket {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []listenSocket
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" { // 0A is TCP_LISTEN
			continue
		}
		ipHex, portHex, found := strings.Cut(fields[1], ":")
		if !found {
			continue
		}
		port, err := strconv.ParseUint(portHex, 16, 16)
		if err != nil {
			continue
		}
		raw, err := hex.DecodeString(ipHex)
		if err != nil || (len(raw) != 4 && len(raw) != 16) {
			continue
		}
		ipBytes := make([]byte, len(raw))
		for i := 0; i < len(raw); i += 4 {
			binary.NativeEndian.PutUint32(ipBytes[i:], binary.BigEndian.Uint32(raw[i:]))
		}
		ip, _ := netip.AddrFromSlice(ipBytes)
		out = append(out, listenSocket{ip: ip, port: int(port), inode: fields[9]})
	}
	return out
}

// socketOwner returns the first pid with an open fd on one of the socket
// inodes, or 0. Processes we may not inspect are skipped.
func socketOwner(inodes map[string]bool) int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		fds, err := os.ReadDir(filepath.Join(p, "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(p, "fd", fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			if inodes[strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]")] {
				pid, _ := strconv.Atoi(filepath.Base(p))
				return pid
			}
		}
	}
	return 0
}

// commandLine returns a process's arguments joined by spaces, cut to a length
// that keeps an error message on one line.
func commandLine(pid int) string {
	args := procArgs(pid)
	s := strings.Join(args, " ")
	if len(args) > 0 {
		// The full path of the executable is noise next to its arguments.
		s = strings.Join(append([]string{filepath.Base(args[0])}, args[1:]...), " ")
	}
	const maxLen = 80
	if len(s) > maxLen {
		s = s[:maxLen-3] + "..."
	}
	return s
}

func procArgs(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// findProcesses returns the pids whose argument list satisfies match.
func findProcesses(match func(args []string) bool) []int {
	var pids []int
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		if args := procArgs(pid); len(args) > 0 && match(args) {
			pids = append(pids, pid)
		}
	}
	return pids
}
