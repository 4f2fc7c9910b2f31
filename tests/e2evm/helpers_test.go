package e2evm

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/testwait"
	"github.com/jonboulle/clockwork"
)

// console copies the guest's serial console (a pty) into w/NAME.console,
// logged when the test fails; nil when the domain shows no pty yet.
func console(t *testing.T, w, name string) func() {
	// The live definition names the serial port's pty.
	out, _ := exec.Command("virsh", "-q", "-c", "qemu:///system", "dumpxml", name).Output()
	m := regexp.MustCompile(`<source path=['"](/dev/pts/[0-9]+)['"]`).FindSubmatch(out)
	if m == nil {
		return nil // not yet: the caller tries again
	}
	f, err := os.Open(string(m[1]))
	if err != nil {
		t.Logf("console of %s: %v", name, err)
		return func() {}
	}
	path := filepath.Join(w, name+".console")
	log, err := os.Create(path)
	if err != nil {
		f.Close()
		return func() {}
	}
	t.Logf("copying %s's console (%s) to %s", name, m[1], path)
	done := make(chan struct{})
	go func() { defer close(done); _, _ = io.Copy(log, f) }()
	stop := func() { f.Close(); <-done; log.Close() }
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(path)
			t.Logf("%s's console:\n%s", name, tail(b, 6000))
		}
	})
	return stop
}

// start runs a program of the cluster in the background, its output in
// w/NAME.log (logged when the test fails), stopped with SIGTERM at the end.
func start(t *testing.T, w, name, bin string, args ...string) (stop func()) {
	t.Helper()
	path := filepath.Join(w, name+".log")
	out, err := os.Create(path)
	must(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	must(t, cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			out.Close()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			b, _ := os.ReadFile(path)
			t.Logf("%s's log:\n%s", name, tail(b, 12000))
		}
	})
	return stop
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// waitFor waits until cond holds, failing after within or when ctx ends
// with what cond said last; it logs each new thing cond says meanwhile.
func waitFor(t *testing.T, ctx context.Context, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	err := testwait.Until(ctx, clockwork.NewRealClock(), within, 100*time.Millisecond, func() (bool, string) {
		ok, msg := cond()
		if !ok && msg != last {
			t.Logf("waiting for %s: %s", what, msg)
			last = msg
		}
		return ok, msg
	})
	if err != nil {
		t.Fatalf("%s: not within %v: %v", what, within, err)
	}
}

func virsh(t *testing.T, args ...string) {
	t.Helper()
	run(t, "virsh", append([]string{"-q", "-c", "qemu:///system"}, args...)...)
}

func virshOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("virsh", append([]string{"-q", "-c", "qemu:///system"}, args...)...).Output()
	if err != nil {
		t.Fatalf("virsh %v: %v", args, err)
	}
	return string(out)
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
