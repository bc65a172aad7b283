package chaos

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// echoServer echoes lines back.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, r *bufio.Reader, msg string, wait time.Duration) (string, error) {
	c.SetDeadline(time.Now().Add(wait))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestProxyCutAndPartition(t *testing.T) {
	p, err := NewProxy("127.0.0.1:0", echoServer(t))
	require.NoError(t, err)
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)
	got, err := roundTrip(c, r, "a", 5*time.Second)
	require.Falsef(t, err != nil || got != "a\n", "through the proxy: %q, %v", got, err)

	// Partition: nothing passes, nothing is closed; after Heal the held
	// bytes arrive.
	p.Partition()
	got, err = roundTrip(c, r, "b", 300*time.Millisecond)
	require.Errorf(t, err, "partitioned, yet %q came back", got)
	ne, ok := err.(net.Error)
	require.Falsef(t, !ok || !ne.Timeout(), "partitioned: want a timeout, got %v", err)
	p.Heal()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	got, err = r.ReadString('\n')
	require.Falsef(t, err != nil || got != "b\n", "after Heal, the held bytes: %q, %v", got, err)

	// Cut: the open connection ends, a new one is closed at once.
	p.Cut()
	_, err = roundTrip(c, r, "c", 5*time.Second)
	require.Error(t, err, "cut, yet the connection still answers")
	c2, err := net.Dial("tcp", p.Addr())
	if err == nil {
		c2.SetDeadline(time.Now().Add(5 * time.Second))
		_, err := bufio.NewReader(c2).ReadString('\n')
		require.Error(t, err, "cut, yet a new connection answers")
		ne, ok := err.(net.Error)
		require.False(t, ok && ne.Timeout(), "cut, yet a new connection is held open instead of closed")
		c2.Close()
	}
	p.Heal()
	c3, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c3.Close()
	got, err = roundTrip(c3, bufio.NewReader(c3), "d", 5*time.Second)
	require.Falsef(t, err != nil || got != "d\n", "after Heal: %q, %v", got, err)
}
