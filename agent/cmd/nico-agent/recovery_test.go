package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent/recovery"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/testwait"
)

// TestAgentServesRecovery: nico-agent on a control-plane machine serves
// the recovery API at recovery.listen with its own certificates. A stop
// holds the host: the agent stops its member and, started again meanwhile
// (systemd restarting it), does not take the host back; the release ends
// the process with 4, and the agent started again serves its member.
func TestAgentServesRecovery(t *testing.T) {
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", etcdtest.FreePort(t))
	file := writeBootstrapConfig(t, dir, addr, "")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out logging.Buffer
	start := func() chan int {
		code := make(chan int, 1)
		go func() { code <- run([]string{"--config", file}, &out) }()
		return code
	}
	d := pki.Dir(filepath.Join(dir, "pki"))
	var op *restore.AgentFleet
	survey := func(code chan int, what string, ok func(restore.HostState) bool) {
		t.Helper()
		testwait.For(t, 60*time.Second, what, func() (bool, string) {
			select {
			case c := <-code:
				t.Fatalf("nico-agent exited %d:\n%s", c, out.String())
			default:
			}
			if op == nil {
				tlsCfg, err := pki.ClientTLS(d.CACert(), d.Cert(pki.RootLeaf), d.Key(pki.RootLeaf))
				if err != nil {
					return false, err.Error()
				}
				op = &restore.AgentFleet{Agents: map[string]string{"cp-1": addr}, TLS: tlsCfg, Op: "restore-test"}
			}
			h := op.Survey(ctx, 5*time.Second)[0]
			return ok(h), fmt.Sprintf("%+v", h)
		})
	}
	code := start()
	survey(code, "the agent serving its member, seen through the recovery API", func(h restore.HostState) bool {
		return h.Serving && h.Held == "" && h.Data == restore.DataMember
	})
	if err := op.Stop(ctx, "cp-1", &member.Fence{By: "restore-test", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	survey(code, "the host held, its member stopped and fenced", func(h restore.HostState) bool {
		return !h.Serving && h.Held == "restore-test" && h.Data == restore.DataFenced
	})
	// Restarted while held (systemd restarting it, a reboot), the agent
	// does not take the host back: it waits for the release.
	stopAgent(t, code, &out)
	code = start()
	survey(code, "the agent started again while held, still held, its member not served", func(h restore.HostState) bool {
		return !h.Serving && h.Held == "restore-test" && strings.Count(out.String(), `msg="the host is held by a recovery operation`) == 2
	})
	// The fence is the test's: remove it, as a restore would replace the
	// data dir, so that the agent can serve the data again.
	if err := os.Remove(filepath.Join(dir, "etcd", member.FenceFile)); err != nil {
		t.Fatal(err)
	}
	if held, _ := recovery.Held(filepath.Join(dir, "etcd")); held != "restore-test" {
		t.Fatalf("hold = %q, want restore-test", held)
	}
	if err := op.Release(ctx, 5*time.Second); err == nil {
		t.Fatal("Release returned before the agent serves again: want it to wait for the agent")
	}
	waitExit(t, code, &out, 4, "after the release")
	code = start() // the service manager starts it again
	survey(code, "the agent started again serving its member", func(h restore.HostState) bool {
		return h.Serving && h.Held == ""
	})
	if err := op.Release(ctx, 30*time.Second); err != nil {
		t.Fatalf("a second release: %v, want none needed", err)
	}
	testwait.For(t, 60*time.Second, "the agent started again ready", func() (bool, string) {
		n := strings.Count(out.String(), `msg="node ready"`)
		return n == 2, fmt.Sprintf("%d ready lines", n)
	})
	stopAgent(t, code, &out)
}
