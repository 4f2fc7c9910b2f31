package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/restore"
)

// TestRecoverThroughAgents: TestRecoverFleetOfAgents with no fleet file:
// the survivors come from the agents, found through the real gossip mesh
// the agents run in (cp-1's lists the others; the lost hosts, dead in it,
// are listed as not answering). The recovery is refused while
// the three answer; after two hosts are lost for good, cp-1's agent forces
// its member into a one-member cluster with every write it had applied, is
// handed back its host (all run by the nicoctl binary), and two new machines join through the
// coordinator's learner path.
func TestRecoverThroughAgents(t *testing.T) {
	t.Parallel()
	nicoctlBin(t)
	f := newFleet(t)
	meshes := map[string]*gossip.Mesh{}
	var seeds []string
	names := f.growRecoveryVoters(func(i int, cfg *agent.Config) {
		m := f.startMesh(cfg.Name, 81+i, seeds...)
		meshes[cfg.Name] = m
		seeds = []string{meshes["cp-1"].Addr()}
		cfg.Gossip = m
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	f.putAppKeys(ctx, f.Client())
	hosts := serveRecoveryMesh(f, meshes, names...)
	rootTLS := etcdtest.ClientTLS(t, pki.RootIdentity)
	survey := func() (map[string]string, []restore.Survivor) {
		t.Helper()
		agents, err := restore.DiscoverAgents(ctx, []string{hosts.addr("cp-1")}, rootTLS, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return agents, restore.Survivors((&restore.AgentFleet{Agents: agents, TLS: rootTLS}).Survey(ctx, surveyBudget))
	}
	if _, ss := survey(); restore.CheckQuorumLost(ctx, ss, 3, rootTLS, 2*time.Second) == nil {
		t.Fatalf("recover allowed while all three voters answer: %+v", ss)
	}
	root := etcdtest.IssueFiles(t, f.TempDir(), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	args := []string{"--tls.caFile", root.CA, "--tls.certFile", root.Cert, "--tls.keyFile", root.Key,
		"recover", "--agents", hosts.addr("cp-1"), "--yes", "--journal", filepath.Join(f.TempDir(), "journal.json")}
	if code, out, errOut := runNicoctl(t, args...); code != 3 || !strings.Contains(errOut, "still has quorum") {
		t.Fatalf("nicoctl recover with quorum: exit %d, want 3 (refused)\n%s%s", code, out, errOut)
	}
	for _, h := range (&restore.AgentFleet{Agents: map[string]string{"cp-1": hosts.addr("cp-1")}, TLS: rootTLS}).Survey(ctx, surveyBudget) {
		if h.Held != "" || !h.Serving {
			t.Fatalf("cp-1 after the refused recover: %+v, want nothing changed", h)
		}
	}

	f.loseForGood(hosts.lose)
	f.Forget("cp-2")
	f.Forget("cp-3")
	agents, survivors := survey()
	if len(agents) != 3 || survivors[0].Node != "cp-1" || survivors[1].Err == "" || survivors[2].Err == "" {
		t.Fatalf("survey after the loss: %v %+v; want cp-1 first, cp-2 and cp-3 listed as not answering", agents, survivors)
	}
	if err := restore.CheckQuorumLost(ctx, survivors, 3, rootTLS, 2*time.Second); err != nil {
		t.Fatalf("one of three voters left: %v", err)
	}
	// nicoctl recover --agents <cp-1's> --yes: the survivors listed,
	// cp-1 proposed and recovered through its agent, its host handed back.
	code, out, errOut := runNicoctl(t, args...)
	for _, w := range []string{"cp-2", "cp-3", "no answer", "proposal: make cp-1", "each member served by its agent again"} {
		if code != 0 || !strings.Contains(out, w) {
			t.Fatalf("nicoctl recover: exit %d, stdout lacks %q\n%s%s", code, w, out, errOut)
		}
	}
	f.regrowRecovered(ctx)
}
