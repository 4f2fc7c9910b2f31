package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/homystack/nico/coordinator/internal/versionroll"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// versionRoller is the leader's etcd-version controller: it rolls the
// EtcdCluster's spec.version across the members nico runs with
// versionroll.Plan, one member at a time. A step writes the node's
// NodeEtcdVersion (the agent restarts its member on that version) and
// takes the one-change slot (store.ActiveOpKey, an Operation of type
// RolloutStep, which membership changes and generation rollouts wait for)
// in one transaction fenced on leadership; the slot is released once the
// member serves the version, healthy. The downgrade API calls and the
// leadership transfer go to etcd directly, as the rollout's do.
type versionRoller struct {
	name  string
	st    *store.Store
	admin versionAdmin
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	last  string
	slots *slotWants
}

// versionAdmin is what the etcd-version controller asks of etcd.
type versionAdmin interface {
	Observe(ctx context.Context) ([]membership.Member, error)
	VersionState(ctx context.Context, url string) (etcdadmin.VersionState, error)
	EnableDowngrade(ctx context.Context, target string) error
	CancelDowngrade(ctx context.Context) error
	MoveLeader(ctx context.Context, leaderURL string, to api.MemberID) error
}

// newVersionRoller returns the etcd-version controller of the term of d.
func newVersionRoller(d leaderDeps) *versionRoller {
	return &versionRoller{name: d.name, st: d.st, admin: d.admin, fence: d.fence, now: d.now, log: d.log, slots: d.slots}
}

// reconcile is the etcd-version controller's Reconcile (controllers.go).
func (r *versionRoller) reconcile(ctx context.Context) error {
	_, err := r.once(ctx)
	return err
}

// once plans and applies one step.
func (r *versionRoller) once(ctx context.Context) (versionroll.Step, error) {
	obs, ok, err := r.observe(ctx)
	if err != nil || !ok {
		if err == nil {
			r.slots.set("etcd-version", "")
		}
		return versionroll.Step{Action: versionroll.None}, err
	}
	now := r.now()
	step := versionroll.Plan(obs, now)
	r.slots.set("etcd-version", versionWant(obs, now))
	if s := step.String(); s != r.last {
		lvl := r.log.Info
		switch step.Action {
		case versionroll.None, versionroll.Wait:
			lvl = r.log.Debug
		case versionroll.Refused, versionroll.Halt:
			lvl = r.log.Warn
		}
		lvl("etcd version step", "action", string(step.Action), "node", step.Node, "version", step.Version, "reason", step.Reason)
		r.last = s
	}
	if err := r.apply(ctx, step, now); err != nil {
		return step, fmt.Errorf("etcd version: %s: %w", step.Action, err)
	}
	return step, nil
}

// observe gathers the planner's input; ok is false when there is nothing
// to roll (no EtcdCluster, no spec.version and no version step held).
func (r *versionRoller) observe(ctx context.Context) (versionroll.Observed, bool, error) {
	// Cheap first: with no spec.version and no version step held there
	// is nothing to ask the members.
	v, err := r.st.View(ctx, store.Key(store.EtcdClusterKey), store.Key(store.ActiveOpKey))
	if err != nil {
		return versionroll.Observed{}, false, fmt.Errorf("coordinator: etcd version: %w", err)
	}
	idle := !strings.HasPrefix(string(v.Value(store.ActiveOpKey)), versionroll.OpPrefix)
	ec := &api.EtcdCluster{}
	if ok, err := v.Decode(store.EtcdClusterKey, ec); err != nil {
		return versionroll.Observed{}, false, fmt.Errorf("coordinator: etcd version: %w", err)
	} else if ok {
		idle = idle && ec.Spec.Version == ""
	}
	if idle {
		return versionroll.Observed{}, false, nil
	}
	o, err := observe(ctx, r.st, r.admin.Observe)
	if err != nil {
		return versionroll.Observed{}, false, err
	}
	obs := versionroll.Observed{}
	if o.Active != nil {
		obs.ActiveOp = o.Active.Metadata.Name
	}
	if o.cluster != nil {
		obs.Target = o.cluster.Spec.Version
		obs.StepTimeout = time.Duration(o.cluster.Spec.Policy.VersionStepTimeout)
	}
	wants, _, err := store.List[api.NodeEtcdVersion](ctx, r.st, store.EtcdVersionsDir)
	if err != nil {
		return obs, false, err
	}
	want := map[string]*api.NodeEtcdVersion{}
	for _, w := range wants {
		want[w.Metadata.Name] = w
	}
	nodeErr := map[string]string{}
	for _, n := range o.Nodes {
		nodeErr[n.Metadata.Name] = n.Status.EtcdVersionError
	}
	leaderURL := ""
	for _, m := range o.Members {
		vm := versionroll.Member{Name: m.Name, Node: m.Node, ID: m.ID, Voter: !m.Learner, Healthy: m.Healthy, Leader: m.Leader,
			Alive: o.Alive[m.Node], Version: m.Version, StorageVersion: m.StorageVersion, Error: nodeErr[m.Node]}
		if len(m.ClientURLs) > 0 {
			vm.ClientURL = m.ClientURLs[0]
			if m.Leader || (leaderURL == "" && m.Healthy) {
				leaderURL = vm.ClientURL
			}
		}
		if w := want[m.Node]; w != nil && m.Node != "" {
			vm.Want, vm.WantSince = w.Spec.Version, w.Spec.Since
		}
		obs.Members = append(obs.Members, vm)
	}
	if leaderURL == "" {
		return obs, true, nil // Plan waits: no leader, no healthy voter
	}
	vs, err := r.admin.VersionState(ctx, leaderURL)
	if err != nil {
		return obs, false, err
	}
	obs.Cluster, obs.Downgrading, obs.DowngradeTarget = vs.Cluster, vs.Downgrading, vs.DowngradeTarget
	return obs, true, nil
}

// apply carries out step.
func (r *versionRoller) apply(ctx context.Context, s versionroll.Step, now time.Time) error {
	switch s.Action {
	case versionroll.EnableDowngrade, versionroll.CancelDowngrade, versionroll.TransferLeader:
		// Changes to etcd itself, which no transaction can fence.
		if err := r.st.Leads(ctx, r.fence); err != nil {
			return err
		}
	}
	switch s.Action {
	case versionroll.EnableDowngrade:
		return r.admin.EnableDowngrade(ctx, s.Version)
	case versionroll.CancelDowngrade:
		return r.admin.CancelDowngrade(ctx)
	case versionroll.TransferLeader:
		return r.admin.MoveLeader(ctx, s.LeaderURL, s.To)
	case versionroll.SetVersion:
		return r.setVersion(ctx, s, now)
	case versionroll.CloseOp:
		return r.closeOp(ctx, s.Op, api.OpSucceeded, s.Reason, now)
	case versionroll.Halt:
		if s.Op != "" {
			return r.closeOp(ctx, s.Op, api.OpFailed, s.Reason, now)
		}
	}
	return nil
}

// setVersion writes the node's desired version and takes the slot.
func (r *versionRoller) setVersion(ctx context.Context, s versionroll.Step, now time.Time) error {
	want := api.NewNodeEtcdVersion(s.Node, s.Version, now)
	want.Metadata.CreatedAt = now
	put, err := store.PutObjectOp(want)
	if err != nil {
		return err
	}
	op := api.NewOperation(s.Op)
	op.Metadata.CreatedAt = now
	op.Spec = api.OperationSpec{Type: api.OpRolloutStep, Node: s.Node, Request: api.EtcdClusterName, StartedBy: r.name}
	op.Status = api.OperationStatus{Phase: api.OpRunning, StepSince: now, Leader: r.name}
	op.Record(now, r.name, s.Reason)
	putOp, err := store.PutObjectOp(op)
	if err != nil {
		return err
	}
	guards := []store.Guard{{Cmp: store.Absent(store.ActiveOpKey), Err: errOpBusy}}
	_, err = r.st.FencedTxn(ctx, r.fence, guards, put, putOp, store.PutValueOp(store.ActiveOpKey, op.Metadata.Name))
	return err
}

// closeOp ends version step name and releases the slot it holds.
func (r *versionRoller) closeOp(ctx context.Context, name string, phase api.OpPhase, why string, now time.Time) error {
	op := &api.Operation{}
	if err := r.st.Get(ctx, store.OpKey(name), op); err != nil {
		return err
	}
	op.Status.Phase, op.Status.Step = phase, api.StepDone
	op.Record(now, r.name, why)
	put, err := store.PutObjectOp(op)
	if err != nil {
		return err
	}
	guards := []store.Guard{{
		Cmp: store.ValueIs(store.ActiveOpKey, name),
		Err: fmt.Errorf("coordinator: version step %s is no longer the active operation", name),
	}}
	_, err = r.st.FencedTxn(ctx, r.fence, guards, put, store.DeleteOp(store.ActiveOpKey))
	return err
}

// versionWant says which member's version step would take the one-change
// slot were it free, when another operation holds it (slotwants.go); ""
// when none would.
func versionWant(obs versionroll.Observed, now time.Time) string {
	if obs.ActiveOp == "" || strings.HasPrefix(obs.ActiveOp, versionroll.OpPrefix) {
		return ""
	}
	obs.ActiveOp = ""
	if s := versionroll.Plan(obs, now); s.Action == versionroll.SetVersion {
		return "etcd version: " + s.String()
	}
	return ""
}
