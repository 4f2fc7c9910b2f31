package systemd

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestRecoveryAPIUnderSystemd: the bootstrap host's nico-agent.service
// serves the recovery API (settings.recovery.listen, :7951) with the
// module's units. The host's root certificate may call it, its node
// certificate may not. A stop holds the host: the agent stops etcd.service
// and stays active (its watchdog fed) while held; a forced serve runs etcd
// under the agent (the exec runtime, as root); the release exits the agent
// with 4, systemd starts it again (RestartForceExitStatus=4), and
// etcd.service serves the member again.
func TestRecoveryAPIUnderSystemd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1")
	sctx, scancel := context.WithTimeout(ctx, 60*time.Second)
	defer scancel()
	if err := cp1.start(sctx, "nico-agent.service"); err != nil {
		t.Fatalf("nico-agent.service did not become active (READY): %v", err)
	}
	api := "https://" + cp1.address + ":7951/v1/recovery/"
	root := `curl -sS --max-time 10 --cacert "$ETCDCTL_CACERT" --cert "$ETCDCTL_CERT" --key "$ETCDCTL_KEY" `
	survey := func(want ...string) func() error {
		return func() error {
			out, err := cp1.sh(ctx, root+api+"survey")
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					return fmt.Errorf("%w: survey lacks %s: %s", errNotYet, w, out)
				}
			}
			return nil
		}
	}
	cp1.waitFor(ctx, "the recovery API answers the root certificate", survey(`"node":"cp1"`, `"serving":true`, `"data":"member"`))
	out, err := cp1.sh(ctx, `curl -sS --max-time 10 --cacert "$ETCDCTL_CACERT" --cert /var/lib/nico/pki/node.crt --key /var/lib/nico/pki/node.key -w ' %{http_code}' `+api+"survey")
	if err != nil || !strings.Contains(out, `"node:cp1\" may not call`) || !strings.HasSuffix(strings.TrimSpace(out), "403") {
		t.Fatalf("the node certificate: %v: %s, want 403 naming it", err, out)
	}
	before := cp1.prop(ctx, "nico-agent.service", "NRestarts").(uint32)

	if out, err := cp1.sh(ctx, root+`-X POST -d '{"op":"restore-systemd"}' `+api+"stop"); err != nil || strings.Contains(out, "error") {
		t.Fatalf("stop: %v: %s", err, out)
	}
	cp1.waitFor(ctx, "held, etcd.service stopped", func() error {
		if st := cp1.prop(ctx, "etcd.service", "ActiveState"); st != "inactive" && st != "failed" {
			return fmt.Errorf("%w: etcd.service %v", errNotYet, st)
		}
		return survey(`"held":"restore-systemd"`, `"serving":false`)()
	})
	if st := cp1.prop(ctx, "nico-agent.service", "ActiveState"); st != "active" {
		t.Fatalf("nico-agent.service %v while held, want active (waiting for the release)\n%s", st, cp1.journal(ctx, 40))
	}
	// A recovery's forced start: the systemd runtime does not pass
	// --force-new-cluster, so the agent runs etcd itself for it (as root);
	// etcd.service (User=etcd) must serve that data dir after the release.
	// It first serves on a private loopback URL, where the agent writes the
	// recovery's hold, and only then on its own.
	hold := `"hold":{"prefix":"/nico/v1/","journal":{"id":"restore-systemd","kind":"Recover","target":"cp1","step":"StartTarget"}}`
	if out, err := cp1.sh(ctx, root+`-X POST -d '{"op":"restore-systemd","force":true,`+hold+`,"clusterToken":"nico"}' `+api+"serve"); err != nil || strings.Contains(out, "error") {
		t.Fatalf("forced serve: %v: %s\n%s", err, out, cp1.journal(ctx, 40))
	}
	cp1.waitFor(ctx, "the forced member serving, still held", survey(`"held":"restore-systemd"`, `"serving":true`))

	if out, err := cp1.sh(ctx, root+`-X POST -d '{"op":"restore-systemd"}' `+api+"release"); err != nil || strings.Contains(out, "error") {
		t.Fatalf("release: %v: %s", err, out)
	}
	cp1.waitFor(ctx, "nico-agent started again by systemd, serving its member", func() error {
		if n := cp1.prop(ctx, "nico-agent.service", "NRestarts").(uint32); n != before+1 {
			return fmt.Errorf("%w: NRestarts %d", errNotYet, n)
		}
		return survey(`"serving":true`, `"data":"member"`)()
	})
	if out, _ := cp1.sh(ctx, root+api+"survey"); strings.Contains(out, `"held"`) {
		t.Fatalf("still held after the release: %s", out)
	}
}
