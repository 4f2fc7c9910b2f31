// Package notifytest gives tests a notify socket, as systemd makes for a
// Type=notify unit: NOTIFY_SOCKET points at it for the test, and the
// messages sent to it are read in order.
package notifytest

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Socket is a unixgram notify socket for one test.
type Socket struct {
	conn *net.UnixConn
	// Path is where it listens (NOTIFY_SOCKET).
	Path string
}

// Listen makes a notify socket and points NOTIFY_SOCKET at it for the rest
// of t. Its directory is short-named: socket paths are limited to 108
// bytes, and t.TempDir() paths can be longer.
func Listen(t testing.TB) *Socket {
	t.Helper()
	dir, err := os.MkdirTemp("", "sdn")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return &Socket{conn: conn, Path: path}
}

// Next returns the next message. Its 30 s deadline only keeps a broken
// test from hanging; no assertion depends on timing.
func (s *Socket) Next(t testing.TB) string {
	t.Helper()
	if err := s.conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	n, err := s.conn.Read(buf)
	if err != nil {
		t.Fatalf("reading the notify socket: %v", err)
	}
	return string(buf[:n])
}

// Conn is the socket's connection, for a test that reads it its own way
// (a short deadline to see that nothing was sent).
func (s *Socket) Conn() *net.UnixConn { return s.conn }
