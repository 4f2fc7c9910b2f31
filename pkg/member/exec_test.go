package member_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

func TestExecContract(t *testing.T) {
	t.Parallel()
	for _, bin := range etcdtest.Binaries(t) {
		t.Run("etcd-"+bin.Version, func(t *testing.T) {
			runtimeContract(t, plain(func() member.Runtime {
				return member.NewExec(bin.Path, member.WithTimings(testTick, testElection))
			}))
		})
	}
}

// TestExecChild checks what only a child process has: its own process group,
// its output in the logger at debug level, and a crash reported by Err.
func TestExecChild(t *testing.T) {
	t.Parallel()
	bin := etcdtest.Binaries(t)[0]
	ctx := caseContext(t)
	var logs logging.Buffer
	cfg := newConfig(t, "child")
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rt := member.NewExec(bin.Path, member.WithTimings(testTick, testElection))
	stopAll(t, rt)
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	pid := rt.Pid()
	if pid <= 0 {
		t.Fatalf("Pid = %d while running", pid)
	}
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("child pgid = %d, %v; want its own group %d", pgid, err, pid)
	}
	if !strings.Contains(logs.String(), `"level":"DEBUG","msg":"etcd","member":"child"`) ||
		!strings.Contains(logs.String(), `"line":"{`) {
		t.Fatalf("child output not forwarded at debug with member and line fields; log:\n%s", logs.String())
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(ctx, t, rt)
	err := rt.Err()
	if err == nil || errors.Is(err, member.ErrRemoved) || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("Err after a crash = %v, want an error saying it was killed", err)
	}
	if rt.Pid() != 0 {
		t.Fatalf("Pid = %d after exit, want 0", rt.Pid())
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatalf("Stop after crash: %v", err)
	}
	if rt.Err() == nil {
		t.Fatal("Stop after a crash cleared Err")
	}
	// Restarting after a crash works from the same data dir.
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatalf("restart after crash: %v", err)
	}
}

// TestExecStopContextEnded checks that Stop escalates when ctx ends before
// the child has exited from SIGTERM.
func TestExecStopContextEnded(t *testing.T) {
	t.Parallel()
	bin := etcdtest.Binaries(t)[0]
	ctx := caseContext(t)
	cfg := newConfig(t, "hurry")
	rt := member.NewExec(bin.Path, member.WithTimings(testTick, testElection))
	stopAll(t, rt)
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := rt.Stop(ended); err != nil {
		t.Fatalf("Stop with ended ctx: %v", err)
	}
	waitDone(ctx, t, rt)
	if err := rt.Err(); err != nil {
		t.Fatalf("Err after Stop = %v, want nil", err)
	}
}

// TestExecHidesNotifySocket checks that the etcd child cannot tell systemd
// that the agent's unit is ready: it must not inherit NOTIFY_SOCKET.
func TestExecHidesNotifySocket(t *testing.T) {
	bin := etcdtest.Binaries(t)[0]
	ctx := caseContext(t)
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)

	rt := member.NewExec(bin.Path, member.WithTimings(testTick, testElection))
	stopAll(t, rt)
	var logs logging.Buffer
	cfg := newConfig(t, "notify")
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if err := rt.Start(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	// etcd notifies just after it starts serving; wait until it has tried.
	err = testwait.Until(ctx, clockwork.NewRealClock(), caseTimeout, 20*time.Millisecond, func() (bool, string) {
		return strings.Contains(logs.String(), "notified init daemon"), logs.String()
	})
	if err != nil {
		t.Fatalf("etcd never logged its systemd notification: %v", err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	// The child has exited, so anything it sent is already queued and a read
	// returns at once; the deadline only ends the wait when nothing came.
	if err := conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	if n, _, err := conn.ReadFrom(buf); err == nil {
		t.Fatalf("etcd child notified the agent's systemd socket: %q", buf[:n])
	}
}
