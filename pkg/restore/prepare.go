package restore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrNotMember is returned for a restore or recovery target that is not a
// member of the cluster.
var ErrNotMember = errors.New("restore: target is not a member")

// Request is what nicoctl restore asks for.
type Request struct {
	Snapshot string
	// SnapshotCluster is the etcd cluster the snapshot was taken from,
	// when its store's metadata names it (0: unknown). With a live
	// cluster it must be that cluster or one of its lineage.
	SnapshotCluster api.MemberID
	Target          string
	// Members are the control-plane members by node name, in the order
	// the others rejoin (the target is taken out).
	Members []string
	// Live is a client of the old cluster when it still answers (nil when
	// it does not): the target must then be one of its members, the
	// snapshot of its fleet, and the one-change slot free. It is wrapped
	// by store.New: pass a client of its own.
	Live         *clientv3.Client
	Prefix       string
	BumpRevision uint64
	Now          time.Time
	// Again allows restoring a cluster that is itself the product of a
	// restore, whose acknowledged history since that restore is lost.
	Again bool
}

// Prepare checks a restore before anything is changed: the snapshot's
// hash and fleet, the target's membership, the one-change slot (which it
// then holds in the old cluster). A refusal leaves everything as it was.
func Prepare(ctx context.Context, req Request) (*Journal, error) {
	if !slices.Contains(req.Members, req.Target) {
		return nil, fmt.Errorf("%w: --target %q, want one of the members %s", ErrNotMember, req.Target, strings.Join(req.Members, ", "))
	}
	info, err := Verify(req.Snapshot, req.Prefix)
	if err != nil {
		return nil, err
	}
	var fleet time.Time
	var live bool
	var lin liveLineage
	voters := info.Voters
	if req.Live != nil {
		if lin.id, voters, err = liveMember(ctx, req.Live, req.Target); err != nil {
			return nil, err
		}
		if fleet, live, err = liveFleet(ctx, req.Live, req.Prefix); err != nil {
			return nil, err
		}
		if lin.earlier, err = readLineage(ctx, req.Live, req.Prefix); err != nil {
			return nil, err
		}
		if req.SnapshotCluster != 0 && !lin.accepts(req.SnapshotCluster) {
			return nil, fmt.Errorf("%w: %s was taken from cluster %s, this fleet is cluster %s and was before %v: a snapshot of another fleet", ErrBadSnapshot, info.Path, req.SnapshotCluster, lin.id, lineageIDs(lin.earlier))
		}
		if err := checkRestoredAgain(ctx, req.Live, req.Prefix, lin, req.Again); err != nil {
			return nil, err
		}
	}
	if err := CheckFleet(info, fleet, live, req.Target); err != nil {
		return nil, err
	}
	id := "restore-" + req.Now.UTC().Format("20060102t150405")
	j := &Journal{
		ID: id, Kind: KindRestore, Target: req.Target,
		Snapshot: info, BumpRevision: req.BumpRevision, Step: StepStop, StartedAt: req.Now, UpdatedAt: req.Now,
		Lineage: lineageOf(info, req.SnapshotCluster, lin, req.Now, id),
	}
	// Only the voters rejoin: a control-plane host that is not a member
	// (a standby) is left as it is, its agent untouched.
	for _, m := range req.Members {
		switch {
		case m == req.Target:
		case len(voters) == 0 || slices.Contains(voters, m):
			j.Others = append(j.Others, m)
		default:
			j.Standbys = append(j.Standbys, m)
		}
	}
	if req.Live != nil {
		if err := ReserveSlot(ctx, req.Live, req.Prefix, j); err != nil {
			return nil, err
		}
	}
	return j, nil
}

// liveMember refuses a target that the live cluster has no started voter
// named after, and a live cluster with a learner (a membership change in
// flight: the restore would rejoin a member that is half added); it
// returns the live cluster's ID and its voters' names.
func liveMember(ctx context.Context, cli *clientv3.Client, target string) (api.MemberID, []string, error) {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("restore: member list of the live cluster: %w", err)
	}
	id := api.MemberID(resp.Header.ClusterId)
	var names, voters, learners []string
	found := false
	for _, m := range resp.Members {
		name := m.Name
		if name == "" {
			name = api.MemberID(m.ID).String() + " (not started)"
		}
		names = append(names, name)
		if m.IsLearner {
			learners = append(learners, name)
			continue
		}
		voters = append(voters, m.Name)
		found = found || m.Name == target
	}
	if !found {
		return 0, nil, fmt.Errorf("%w: --target %q is not a voter of the live cluster %s (members: %s)", ErrNotMember, target, id, strings.Join(names, ", "))
	}
	if len(learners) > 0 {
		return 0, nil, fmt.Errorf("%w: a membership change is in flight in the live cluster %s: learner %s; wait until it is promoted or removed, then run the command again (nothing was changed)", ErrBusy, id, strings.Join(learners, ", "))
	}
	return id, voters, nil
}

// liveFleet reads the live cluster's EtcdCluster creation time; ok is
// false when it has none.
func liveFleet(ctx context.Context, cli *clientv3.Client, prefix string) (created time.Time, ok bool, err error) {
	kv, _, err := store.GetUnder(ctx, cli, prefix, store.EtcdClusterKey)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("restore: read the live EtcdCluster: %w", err)
	}
	if kv == nil {
		return time.Time{}, false, nil
	}
	var c api.EtcdCluster
	if err := decodeJSON(kv.Value, &c); err != nil {
		return time.Time{}, false, fmt.Errorf("restore: decode the live EtcdCluster: %w", err)
	}
	return c.Metadata.CreatedAt, true, nil
}
