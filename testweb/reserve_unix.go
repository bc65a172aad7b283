//go:build unix

package testweb

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
)

// reservePort binds a TCP port on ip without listening: a connect to it is
// refused, and the port stays taken (no one else can listen on it) until
// the returned Closer is closed.
func reservePort(ip string) (io.Closer, string, error) {
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return nil, "", fmt.Errorf("not an IPv4 address: %q", ip)
	}
	syscall.ForkLock.RLock() // as package net does where SOCK_CLOEXEC is missing
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, "", os.NewSyscallError("socket", err)
	}
	f := os.NewFile(uintptr(fd), "reserved-port")
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: a.As4()}); err != nil {
		f.Close()
		return nil, "", os.NewSyscallError("bind", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		f.Close()
		return nil, "", os.NewSyscallError("getsockname", err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	return f, net.JoinHostPort(ip, fmt.Sprint(port)), nil
}
