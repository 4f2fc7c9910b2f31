package systemd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// poolView is what the test reads of nicoctl pool get -o json.
type poolView struct {
	Metadata struct {
		Declared *struct {
			Revision string `json:"revision"`
			Host     string `json:"host"`
		} `json:"declared"`
	} `json:"metadata"`
	Spec struct {
		Count int `json:"count"`
	} `json:"spec"`
}

// pool reads machine pool name through nicoctl in the guest.
func (g *guest) pool(ctx context.Context, name string) (poolView, error) {
	out, err := g.sh(ctx, "nicoctl pool get "+name+" -o json")
	if err != nil {
		return poolView{}, fmt.Errorf("%w: %s", err, out)
	}
	var ps []poolView
	if err := json.Unmarshal([]byte(out), &ps); err != nil || len(ps) != 1 {
		return poolView{}, fmt.Errorf("nicoctl pool get %s: %v: %s", name, err, out)
	}
	return ps[0], nil
}

// wantPool fails the test unless pool web has count, marked with rev.
func wantPool(ctx context.Context, t *testing.T, g *guest, count int, rev string) {
	t.Helper()
	p, err := g.pool(ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.Count != count || p.Metadata.Declared == nil || p.Metadata.Declared.Revision != rev || p.Metadata.Declared.Host != "cp1" {
		t.Fatalf("pool web: count %d, mark %+v; want count %d, revision %s by cp1", p.Spec.Count, p.Metadata.Declared, count, rev)
	}
}

// TestDeclaredObjects: cp1 declares a machine pool in the flake
// (hosts.nix cp1-objects). Starting the agent starts nico-objects once
// the agent is ready, which applies it; nicoctl pool scale of it is
// refused without --force and shows as drift; a switch that changes only
// the manifest restarts nico-objects, which applies the new revision
// (writing the drift back); a switch to a manifest refused against the
// cluster fails nico-objects with the field named, writes nothing and
// leaves the agent running; the agent started again starts (READY, its
// member serving) and nico-objects fails again, writing nothing.
func TestDeclaredObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1-objects")
	mustStart(ctx, t, cp1, "nico-agent.service")
	objectsState := func(want string) {
		t.Helper()
		cp1.waitFor(ctx, "nico-objects.service "+want, func() error {
			if s := cp1.prop(ctx, "nico-objects.service", "ActiveState"); s != want {
				return fmt.Errorf("%w: %v", errNotYet, s)
			}
			return nil
		})
	}
	objectsState("active")
	wantPool(ctx, t, cp1, 2, "r1")

	if out, err := cp1.sh(ctx, "nicoctl pool scale web 5"); err == nil || !strings.Contains(out, "declared in the flake (revision r1, applied by cp1)") {
		t.Fatalf("nicoctl pool scale of a flake's pool: %v: %s; want refused", err, out)
	}
	if out, err := cp1.sh(ctx, "nicoctl pool scale web 5 --force"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	did := cp1.switchTo(ctx, "cp1-objects-next")
	if did["nico-objects.service"] != "restart" || did["nico-agent.service"] != "" {
		t.Fatalf("switch to the next manifest: %v; want nico-objects.service restarted, the agent left alone", did)
	}
	wantPool(ctx, t, cp1, 3, "r2")

	did = cp1.switchTo(ctx, "cp1-objects-bad")
	if !strings.HasPrefix(did["nico-objects.service"], "restart failed") {
		t.Fatalf("switch to a refused manifest: %v; want nico-objects.service failed", did)
	}
	// journald takes a unit's output through a stream, so the lines of a
	// run that just failed may reach the journal a moment after systemd
	// records the failure: wait for them rather than read once.
	refusals := func(want int) {
		t.Helper()
		cp1.waitFor(ctx, fmt.Sprintf("%d refusals naming the field in nico-objects' journal", want), func() error {
			out, err := cp1.Exec(ctx, "journalctl", "--no-pager", "-o", "cat", "-u", "nico-objects.service")
			if err != nil {
				return fmt.Errorf("journalctl: %w: %s", err, out)
			}
			n := strings.Count(string(out), "apply-objects: /etc/nico/objects.yaml refused, nothing written")
			named := strings.Count(string(out), "spec.members[0].peerURLs[0]")
			if n > want {
				t.Fatalf("%d refusals in nico-objects' journal, want %d:\n%s", n, want, out)
			}
			if n < want || named < want {
				return fmt.Errorf("%w: %d refusals, %d naming spec.members[0].peerURLs[0]", errNotYet, n, named)
			}
			return nil
		})
	}
	refusals(1)
	objectsState("failed")
	if got := cp1.prop(ctx, "nico-agent.service", "ActiveState"); got != "active" {
		t.Fatalf("nico-agent.service is %v after nico-objects failed; want it running", got)
	}
	wantPool(ctx, t, cp1, 3, "r2")

	// A signal rather than systemctl restart: the stop job of the agent
	// would hold up the stop of etcd.service it asks for on its way out
	// (etcd is ordered before it) until its own 15 s timeout.
	if out, err := cp1.Exec(ctx, "systemctl", "kill", "--signal=SIGTERM", "nico-agent.service"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cp1.waitFor(ctx, "the agent stopped", func() error {
		if s := cp1.prop(ctx, "nico-agent.service", "ActiveState"); s != "inactive" {
			return fmt.Errorf("%w: %v", errNotYet, s)
		}
		return nil
	})
	if err := cp1.start(ctx, "nico-agent.service"); err != nil {
		t.Fatalf("the agent did not start with a refused manifest: %v", err)
	}
	refusals(2)
	objectsState("failed")
	wantPool(ctx, t, cp1, 3, "r2")
}
