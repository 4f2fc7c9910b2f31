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
// (hosts.nix cp1-objects). The agent applies it before READY; nicoctl
// pool scale of it is refused without --force and shows as drift; a
// switch that changes only the manifest reloads the agent, which applies
// the new revision (writing the drift back); a switch to a manifest
// refused against the cluster fails the reload with the field named and
// writes nothing; an agent restarted with it still starts (READY, its
// member serving), the refusal in its status, and writes nothing.
func TestDeclaredObjects(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newCluster(t)
	cp1 := c.boot(ctx, "cp1-objects")
	mustStart(ctx, t, cp1, "nico-agent.service")
	wantPool(ctx, t, cp1, 2, "r1")

	if out, err := cp1.sh(ctx, "nicoctl pool scale web 5"); err == nil || !strings.Contains(out, "declared in the flake (revision r1, applied by cp1)") {
		t.Fatalf("nicoctl pool scale of a flake's pool: %v: %s; want refused", err, out)
	}
	if out, err := cp1.sh(ctx, "nicoctl pool scale web 5 --force"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	did := cp1.switchTo(ctx, "cp1-objects-next")
	if did["nico-agent.service"] != "reload" {
		t.Fatalf("switch to the next manifest: %v; want nico-agent.service reloaded", did)
	}
	wantPool(ctx, t, cp1, 3, "r2")

	did = cp1.switchTo(ctx, "cp1-objects-bad")
	if !strings.HasPrefix(did["nico-agent.service"], "reload failed") {
		t.Fatalf("switch to a refused manifest: %v; want the reload failed", did)
	}
	if j := cp1.journal(ctx, 40); !strings.Contains(j, "spec.members[0].peerURLs[0]") || !strings.Contains(j, "refused, nothing written") {
		t.Fatalf("the journal does not name the refused field:\n%s", j)
	}
	if got := cp1.prop(ctx, "nico-agent.service", "ActiveState"); got != "active" {
		t.Fatalf("nico-agent.service is %v after a failed reload; want it running", got)
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
	// STATUS= follows READY=1 in another datagram.
	cp1.waitFor(ctx, "the agent's status names the refused field", func() error {
		if st, _ := cp1.prop(ctx, "nico-agent.service", "StatusText").(string); !strings.Contains(st, "the flake's objects not applied") || !strings.Contains(st, "spec.members[0].peerURLs[0]") {
			return fmt.Errorf("%w: status %q", errNotYet, st)
		}
		return nil
	})
	wantPool(ctx, t, cp1, 3, "r2")
}
