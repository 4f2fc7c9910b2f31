package systemd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestBootstrapHost boots the bootstrap control-plane host (hosts.nix cp1:
// roles = [ "controlPlane" ]; bootstrap = true) with the units the module
// renders, and starts nico-agent.service as multi-user.target would: the
// start job completes only once the agent sent READY=1, which it does once
// its member is a voter; etcd runs as User=etcd and serves TLS only, with
// the certificates the module placed; nico-coordinator.service reaches
// active (READY) and wins the election.
func TestBootstrapHost(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1")

	start := time.Now()
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	if err := cp1.start(sctx, "nico-agent.service"); err != nil {
		t.Fatalf("nico-agent.service did not become active (READY): %v (NRestarts %v)", err, cp1.prop(ctx, "nico-agent.service", "NRestarts"))
	}
	t.Logf("nico-agent.service active %v after its start", time.Since(start).Round(time.Millisecond))
	ms, err := cp1.members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := voters(ms); !slices.Equal(got, []string{"cp1"}) {
		t.Fatalf("voters once nico-agent is active: %v, want [cp1] (members %+v)", got, ms)
	}

	t.Run("EtcdRunsAsEtcd", func(t *testing.T) {
		if st := cp1.prop(ctx, "etcd.service", "ActiveState"); st != "active" {
			t.Fatalf("etcd.service is %v, want active", st)
		}
		pid := cp1.prop(ctx, "etcd.service", "MainPID")
		out, err := cp1.Exec(ctx, "ps", "-o", "user=", "-p", fmt.Sprint(pid))
		if user := strings.TrimSpace(string(out)); err != nil || user != "etcd" {
			t.Fatalf("etcd (pid %v) runs as %q (%v), want etcd", pid, user, err)
		}
	})

	t.Run("EtcdServesTLSOnly", func(t *testing.T) {
		// With root's certificate of the host's pki: healthy.
		out, err := cp1.sh(ctx, `curl -sS --cacert "$ETCDCTL_CACERT" --cert "$ETCDCTL_CERT" --key "$ETCDCTL_KEY" https://`+cp1.address+`:2379/health`)
		if err != nil || !strings.Contains(out, `"health":"true"`) {
			t.Fatalf("etcd over TLS with the host's certificates: %v: %s", err, out)
		}
		// Plain http, and TLS without a client certificate, are refused.
		if out, err := cp1.sh(ctx, "curl -sS --max-time 5 http://127.0.0.1:2379/health"); err == nil {
			t.Fatalf("etcd answered plain http: %s", out)
		}
		if out, err := cp1.sh(ctx, `curl -sS --max-time 5 --cacert "$ETCDCTL_CACERT" https://127.0.0.1:2379/health`); err == nil && strings.Contains(out, `"health":"true"`) {
			t.Fatalf("etcd answered a client without a certificate: %s", out)
		}
	})

	t.Run("CoordinatorActiveAndLeader", func(t *testing.T) {
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		if err := cp1.start(sctx, "nico-coordinator.service"); err != nil {
			t.Fatalf("nico-coordinator.service did not become active (READY): %v (NRestarts %v)", err, cp1.prop(ctx, "nico-coordinator.service", "NRestarts"))
		}
		cp1.waitFor(ctx, "the coordinator on cp1 wins the election", func() error {
			out, err := cp1.sh(ctx, "nicoctl status -o json")
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			if !strings.Contains(out, `"coordinator": "cp1"`) && !strings.Contains(out, `"coordinator":"cp1"`) {
				return fmt.Errorf("%w: %s", errNotYet, out)
			}
			return nil
		})
	})

	if n := cp1.prop(ctx, "nico-agent.service", "NRestarts"); n != uint32(0) {
		t.Errorf("nico-agent.service restarted %v times, want 0", n)
	}
}
