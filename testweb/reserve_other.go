//go:build !unix

package testweb

import (
	"io"
	"net"
)

// reservePort returns a port on ip that nothing listens on: bound, then
// released (another process could take it meanwhile; on unix the port
// stays reserved).
func reservePort(ip string) (io.Closer, string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, "", err
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return nil, "", err
	}
	return io.NopCloser(nil), addr, nil
}
