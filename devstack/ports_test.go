package devstack

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckPortFreeNamesTheOwner(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			host := "127.0.0.1"
			if network == "tcp6" {
				host = "::1"
			}
			ln, err := net.Listen(network, net.JoinHostPort(host, "0"))
			if err != nil {
				t.Skipf("skipping: no %s loopback: %v", network, err)
			}
			defer ln.Close()
			addr := ln.Addr().String()

			err = CheckPortFreeFor(addr, "TEMPORAL_ADDRESS")
			var pe *PortInUseError
			require.ErrorAs(t, err, &pe)
			require.Equal(t, os.Getpid(), pe.PID)
			self, _ := os.Executable()
			require.Contains(t, err.Error(), addr+" is already in use by pid "+strconv.Itoa(os.Getpid())+" ("+filepath.Base(self))
			require.Contains(t, err.Error(), "; stop it or set TEMPORAL_ADDRESS")
		})
	}
}

func TestCheckPortFreeWildcardListener(t *testing.T) {
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	require.NoError(t, err)
	defer ln.Close()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)

	err = CheckPortFree("127.0.0.1:" + port)
	var pe *PortInUseError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, os.Getpid(), pe.PID)
}

func TestCheckPortFreeFree(t *testing.T) {
	require.NoError(t, CheckPortFree(freeAddr(t)))
	require.NoError(t, CheckPortFree("127.0.0.1:0"))
	require.Error(t, CheckPortFree("no-port"))
}

func TestPortInUseErrorUnknownOwner(t *testing.T) {
	err := &PortInUseError{Addr: "127.0.0.1:9092"}
	require.Equal(t, "127.0.0.1:9092 is already in use by another process; stop it or choose another address", err.Error())
}

func writeFile(path, content string) error {
	return os.WriteFile(path, []byte(content), 0o644)
}
