package restore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func putObject(ctx context.Context, cli *clientv3.Client, key string, obj api.Object) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	_, err = cli.Put(ctx, prefix+key, string(b))
	return err
}

func (f *testFleet) urls() map[string]string {
	out := map[string]string{}
	for _, m := range f.Members {
		out[m.Name] = m.ClientURL
	}
	return out
}

// TestRecoverAfterQuorumLoss: three voters with data, two killed for
// good (their data dirs gone). The survey finds the survivor, the
// recovery makes it a one-member cluster with every write it had applied,
// and the two replacement machines rejoin as learners and are promoted.
func TestRecoverAfterQuorumLoss(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := startFleet(t, 3, "")
	cli := f.client()
	f.seed(ctx, fleetTime)
	ec := &api.EtcdCluster{TypeMeta: api.TypeMeta{APIVersion: api.Version, Kind: api.KindEtcdCluster}, Metadata: api.ObjectMeta{Name: "etcd", CreatedAt: fleetTime}}
	ec.Spec.Policy.RecoverWithoutConfirmation = true
	if err := putObject(ctx, cli, store.EtcdClusterKey, ec); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if _, err := cli.Put(ctx, fmt.Sprintf("k%02d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	cli.Close()
	for _, m := range f.Members[1:] {
		if err := m.Runtime.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(m.DataDir); err != nil {
			t.Fatal(err)
		}
	}
	survivors := Survey(ctx, f.urls(), nil, time.Second)
	if survivors[0].Node != "cp-1" || survivors[0].Err != "" || survivors[1].Err == "" || survivors[2].Err == "" {
		t.Fatalf("survey: %+v, want cp-1 first and answering, the two others not", survivors)
	}
	if err := CheckQuorumLost(ctx, survivors, 3, nil, 2*time.Second); err != nil {
		t.Fatalf("quorum of 3 with 1 survivor: %v", err)
	}
	if ok, err := RecoveryAllowed(ctx, survivors[0].ClientURL, prefix, nil, time.Second); err != nil || !ok {
		t.Fatalf("RecoveryAllowed with spec.policy.recoverWithoutConfirmation = %v, %v; want true (read without quorum)", ok, err)
	}
	j, err := RecoverJournal(survivors, []string{"cp-2", "cp-3"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{Fleet: f, Journal: FileJournal{Path: filepath.Join(t.TempDir(), "journal.json")}, Prefix: prefix}
	if err := r.Run(ctx, j); err != nil {
		t.Fatal(err)
	}
	ncli := f.client()
	for i := range 50 {
		resp, err := ncli.Get(ctx, fmt.Sprintf("k%02d", i))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("write k%02d applied before the loss: %v %v", i, resp, err)
		}
	}
	list, err := ncli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 3 {
		t.Fatalf("%d members after recovery, want 3: %v", len(list.Members), list.Members)
	}
	for _, m := range list.Members {
		if m.IsLearner {
			t.Fatalf("%s still a learner", m.Name)
		}
	}
}

// TestRecoverRefusedWithQuorum: with all three voters, and with one of
// three down, the cluster has quorum: recover is refused with the reason,
// and the survey changed nothing.
func TestRecoverRefusedWithQuorum(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f := startFleet(t, 3, "")
	check := func(what string) {
		t.Helper()
		s := Survey(ctx, f.urls(), nil, time.Second)
		err := CheckQuorumLost(ctx, s, 3, nil, 2*time.Second)
		if !errors.Is(err, ErrHasQuorum) {
			t.Fatalf("%s: CheckQuorumLost = %v, want ErrHasQuorum", what, err)
		}
		t.Logf("%s: refused: %v", what, err)
	}
	check("all voters up")
	if err := f.Members[2].Runtime.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	check("one of three down")
	for _, m := range f.Members[:2] {
		if isDone(m.Runtime.Done()) {
			t.Fatalf("%s stopped by a refused recovery", m.Name)
		}
	}
}

// TestRecoverJournalOrder: the most advanced answering voter is the
// target, the other answering members rejoin, then the replacements; a
// learner is never the target.
func TestRecoverJournalOrder(t *testing.T) {
	t.Parallel()
	ss := []Survivor{{Node: "c", Applied: 9}, {Node: "l", Applied: 20, Learner: true}, {Node: "a", Applied: 10, Revision: 5}, {Node: "b", Err: "refused"}, {Node: "d", Applied: 10, Revision: 7}}
	sortSurvivors(ss)
	j, err := RecoverJournal(ss, []string{"new-1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if j.Target != "d" || fmt.Sprint(j.Others) != "[a c l new-1]" {
		t.Fatalf("target %s, others %v; want d, [a c l new-1]", j.Target, j.Others)
	}
	if _, err := RecoverJournal([]Survivor{{Node: "l", Learner: true}}, nil, time.Now()); !errors.Is(err, ErrNoSurvivor) {
		t.Fatalf("a learner alone: %v, want ErrNoSurvivor", err)
	}
}
