package main

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/homystack/nico/pkg/sdnotify/notifytest"
)

// notifySocket makes a unixgram notify socket and points NOTIFY_SOCKET at
// it, with the watchdog on at interval for this process. The directory is
// short-named: socket paths are limited to 108 bytes.
func notifySocket(t *testing.T, interval time.Duration) *notifytest.Socket {
	t.Helper()
	sock := notifytest.Listen(t)
	t.Setenv("WATCHDOG_USEC", strconv.FormatInt(interval.Microseconds(), 10))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	return sock
}

// fakeCandidate campaigns when told and is healthy when told.
type fakeCandidate struct {
	campaigning chan struct{}
	healthy     atomic.Bool
	checks      atomic.Int32
	checked     chan struct{} // closed at the third health check
}

func (f *fakeCandidate) Campaigning() <-chan struct{} { return f.campaigning }

func (f *fakeCandidate) Healthy() bool {
	if f.checks.Add(1) == 3 {
		close(f.checked)
	}
	return f.healthy.Load()
}

// TestNotifyReadyWatchdogStopping: nothing before the candidate campaigns,
// then READY=1; no WATCHDOG=1 while it is unhealthy, WATCHDOG=1 pings once
// it is healthy; STOPPING=1 at the end.
func TestNotifyReadyWatchdogStopping(t *testing.T) {
	sock := notifySocket(t, 10*time.Millisecond)
	f := &fakeCandidate{campaigning: make(chan struct{}), checked: make(chan struct{})}
	n := sdnotify.New()
	stop := notifySystemd(t.Context(), n, f, logging.Test(t))
	// Datagrams keep their order: anything sent before the marker arrives
	// before it.
	if err := n.Status("marker 1"); err != nil {
		t.Fatal(err)
	}
	if got := sock.Next(t); got != "STATUS=marker 1" {
		t.Fatalf("before campaigning: datagram %q, want none", got)
	}
	close(f.campaigning)
	if got := sock.Next(t); got != "READY=1" {
		t.Fatalf("datagram %q, want READY=1", got)
	}
	if got := sock.Next(t); got != "STATUS=campaigning for leadership" {
		t.Fatalf("datagram %q, want the campaigning status", got)
	}
	select {
	case <-f.checked:
	case <-time.After(30 * time.Second):
		t.Fatal("the watchdog loop does not check health")
	}
	if err := n.Status("marker 2"); err != nil {
		t.Fatal(err)
	}
	if got := sock.Next(t); got != "STATUS=marker 2" {
		t.Fatalf("while unhealthy: datagram %q, want no WATCHDOG=1", got)
	}
	f.healthy.Store(true)
	for range 3 {
		if got := sock.Next(t); got != "WATCHDOG=1" {
			t.Fatalf("while healthy: datagram %q, want WATCHDOG=1", got)
		}
	}
	stop()
	for {
		got := sock.Next(t)
		if got == "STOPPING=1" {
			break
		}
		if got != "WATCHDOG=1" {
			t.Fatalf("datagram %q, want STOPPING=1", got)
		}
	}
}

// TestRunNotifiesSystemd: nico-coordinator under a notify socket with the
// watchdog on sends READY=1 once it campaigns, then feeds the watchdog,
// and STOPPING=1 on SIGTERM (the unit is Type=notify, WatchdogSec=30s).
func TestRunNotifiesSystemd(t *testing.T) {
	cl := etcdtest.StartWith(t, etcdtest.Options{Members: 1, TLS: true})
	id := etcdtest.IssueFiles(t, filepath.Join(t.TempDir(), "pki"), pki.Request{CommonName: pki.CoordinatorIdentity, Usage: pki.UsageClient})
	sock := notifySocket(t, 50*time.Millisecond)
	var out logging.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run([]string{"--name", "c-1", "--etcd.endpoints", cl.Endpoints()[0],
			"--tls.caFile", id.CA, "--tls.certFile", id.Cert, "--tls.keyFile", id.Key}, &out)
	}()
	want := []string{"READY=1", "STATUS=campaigning for leadership", "WATCHDOG=1", "WATCHDOG=1"}
	for _, w := range want {
		if got := sock.Next(t); got != w {
			t.Fatalf("datagram %q, want %q:\n%s", got, w, out.String())
		}
	}
	// READY came after the signal handler was registered.
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		got := sock.Next(t)
		if got == "STOPPING=1" {
			break
		}
		if got != "WATCHDOG=1" {
			t.Fatalf("datagram %q, want STOPPING=1:\n%s", got, out.String())
		}
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d after SIGTERM, want 0:\n%s", c, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("nico-coordinator did not stop on SIGTERM:\n%s", out.String())
	}
}
