package sdnotify

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/sdnotify/notifytest"
)

func watchdogEnv(t *testing.T, interval time.Duration) {
	t.Setenv("WATCHDOG_USEC", strconv.FormatInt(interval.Microseconds(), 10))
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
}

func TestMessages(t *testing.T) {
	sock := notifytest.Listen(t)
	n := New()
	if !n.Enabled() {
		t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
	}
	tests := []struct {
		send func() error
		want string
	}{
		{n.Ready, "READY=1"},
		{func() error { return n.Status("joining cluster") }, "STATUS=joining cluster"},
		{func() error { return n.Status("two\nlines\r\nMAINPID=1") }, "STATUS=two lines MAINPID=1"},
		{n.Watchdog, "WATCHDOG=1"},
		{n.Stopping, "STOPPING=1"},
		{func() error { return n.ExtendTimeout(90 * time.Second) }, "EXTEND_TIMEOUT_USEC=90000000"},
		{func() error { return n.ExtendTimeout(1500 * time.Nanosecond) }, "EXTEND_TIMEOUT_USEC=2"},
		{func() error { return n.ExtendTimeout(0) }, "EXTEND_TIMEOUT_USEC=1"},
	}
	for _, tt := range tests {
		if err := tt.send(); err != nil {
			t.Fatalf("send %q: %v", tt.want, err)
		}
		if got := sock.Next(t); got != tt.want {
			t.Errorf("datagram = %q, want %q", got, tt.want)
		}
	}
}

func TestNoSocketIsNoOp(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	watchdogEnv(t, time.Second)
	for _, n := range []*Notifier{New(), {}, nil} {
		for _, err := range []error{n.Ready(), n.Status("x"), n.Watchdog(), n.Stopping(), n.ExtendTimeout(time.Second)} {
			if err != nil {
				t.Errorf("without a socket: %v", err)
			}
		}
		if _, ok := n.WatchdogInterval(); ok {
			t.Error("WatchdogInterval() on without a socket")
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := n.RunWatchdog(ctx, func() bool { return true }); err != nil {
			t.Errorf("RunWatchdog: %v", err)
		}
	}
}

func TestSendErrorIsReturned(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "absent"))
	if err := New().Ready(); err == nil {
		t.Error("Ready() to an absent socket succeeded")
	}
}

func TestWatchdogInterval(t *testing.T) {
	notifytest.Listen(t)
	tests := []struct {
		name, usec, pid string
		want            time.Duration
		wantOK          bool
	}{
		{"on", "30000000", strconv.Itoa(os.Getpid()), 30 * time.Second, true},
		{"on without pid", "5000", "", 5 * time.Millisecond, true},
		{"other process", "30000000", strconv.Itoa(os.Getpid() + 1), 0, false},
		{"off", "", "", 0, false},
		{"malformed", "soon", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("WATCHDOG_USEC", tt.usec)
			t.Setenv("WATCHDOG_PID", tt.pid)
			got, ok := New().WatchdogInterval()
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("WatchdogInterval() = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestRunWatchdogFeedsWhileHealthy(t *testing.T) {
	sock := notifytest.Listen(t)
	watchdogEnv(t, 10*time.Millisecond)
	n := New()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- n.RunWatchdog(ctx, func() bool { return true }) }()
	for range 3 {
		if got := sock.Next(t); got != "WATCHDOG=1" {
			t.Fatalf("datagram = %q, want WATCHDOG=1", got)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("RunWatchdog: %v", err)
	}
}

func TestRunWatchdogSilentWhileUnhealthy(t *testing.T) {
	sock := notifytest.Listen(t)
	watchdogEnv(t, 10*time.Millisecond)
	n := New()
	ctx, cancel := context.WithCancel(t.Context())
	var checks atomic.Int32
	checked := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- n.RunWatchdog(ctx, func() bool {
			if checks.Add(1) == 3 {
				close(checked)
			}
			return false
		})
	}()
	<-checked
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunWatchdog: %v", err)
	}
	// Datagrams keep their order: if a WATCHDOG=1 had been sent it would
	// arrive before the marker.
	if err := n.Status("marker"); err != nil {
		t.Fatal(err)
	}
	if got := sock.Next(t); got != "STATUS=marker" {
		t.Errorf("datagram = %q, want only the marker", got)
	}
}

func TestRunWatchdogResumesWhenHealthy(t *testing.T) {
	sock := notifytest.Listen(t)
	watchdogEnv(t, 10*time.Millisecond)
	n := New()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var checks atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- n.RunWatchdog(ctx, func() bool { return checks.Add(1) > 3 })
	}()
	if got := sock.Next(t); got != "WATCHDOG=1" {
		t.Fatalf("datagram = %q, want WATCHDOG=1", got)
	}
	if c := checks.Load(); c < 4 {
		t.Errorf("fed after %d health checks, want the first healthy one (4th)", c)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("RunWatchdog: %v", err)
	}
}
