package coordinator

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/failpoint"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/rollout"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// rollouter is the leader's rollout controller: it re-reads the rollout, the
// nodes, their configurations and etcd's members, plans one step with
// rollout.Plan and applies it. Every step is written in one transaction
// fenced on leadership, so a new leader resumes from the journal. A rollout
// step holds store.ActiveOpKey (an Operation of type RolloutStep) for as
// long as its nodes apply, so that no membership change runs beside it.
type rollouter struct {
	name  string
	st    *store.Store
	admin leaderMover
	fence store.Fence
	now   func() time.Time
	log   *slog.Logger
	// metrics may be nil (its methods then record nothing).
	metrics *metrics.Coordinator
	// policy is Config.Policy, under the EtcdCluster's own.
	policy membership.Policy
	// obs is told of each step (Config.Observer).
	obs Observer
	// hooks are Config.Clusters.
	hooks *ClusterHooks
	snaps *snapshotter
	// slots name the changes that wait for the one-change slot.
	slots *slotWants
	// settled are the rollouts a pass found finished, or halted with no
	// undo asked, by name, with the revision they were read at: passes
	// read them again only once they change.
	settled settledRollouts
	last    string
	// refused is the last eviction refused on each draining worker.
	refused map[string]string
}

// newRollouter returns the rollout controller of the term of d.
func newRollouter(d leaderDeps, policy membership.Policy, hooks *ClusterHooks, snaps *snapshotter) *rollouter {
	return &rollouter{name: d.name, st: d.st, admin: d.admin, fence: d.fence, now: d.now, log: d.log, metrics: d.metrics,
		policy: policy, obs: d.obs, hooks: hooks, snaps: snaps, slots: d.slots, settled: settledRollouts{}}
}

// reconcile is the rollout controller's Reconcile (controllers.go). A
// step that only records nodes done, starting none in their places, is
// followed at once by the next plan, so the batch after the last one done
// starts in the same pass rather than after the watch brings back the
// rollouter's own write.
func (r *rollouter) reconcile(ctx context.Context) error {
	for range maxChainedSteps {
		step, err := r.once(ctx)
		if err != nil || step.Action != rollout.MarkDone || len(step.Extend) > 0 {
			return err
		}
	}
	return nil
}

// maxChainedSteps bounds the steps one pass plans in a row.
const maxChainedSteps = 4

// once plans and applies one step of the oldest unfinished rollout.
func (r *rollouter) once(ctx context.Context) (rollout.Step, error) {
	ro, err := activeRollout(ctx, r.st, r.settled)
	if err != nil || ro == nil {
		return rollout.Step{Action: rollout.None}, err
	}
	obs, active, err := r.observe(ctx, ro)
	if err != nil {
		return rollout.Step{}, err
	}
	now := r.now()
	step := rollout.Plan(obs, now)
	if s := ro.Metadata.Name + " " + step.String(); s != r.last {
		lvl := r.log.Info
		if step.Action == rollout.None || step.Action == rollout.Wait {
			lvl = r.log.Debug
		}
		lvl("rollout step", "rollout", ro.Metadata.Name, "action", string(step.Action), "nodes", step.Nodes, "reason", step.Reason)
		r.last = s
	}
	if step.Action != rollout.None && step.Action != rollout.Wait {
		r.obs.RolloutStep(ro.Metadata.Name, step)
	}
	if err := r.apply(ctx, ro, obs, active, step, now); err != nil {
		return step, fmt.Errorf("rollout %s: %s: %w", ro.Metadata.Name, step.Action, err)
	}
	if step.Action != rollout.None && step.Action != rollout.Wait {
		r.metrics.RolloutStep(ro, now) // ro as written (apply records the step in it)
	}
	return step, nil
}

// activeRollout returns the rollout to work on: the one whose step is in
// flight, else the oldest one that has neither finished nor halted (a
// halted rollout waits for undo and does not block newer ones), or nil.
// It lists the rollouts' keys and reads the values of those not settled
// at their current revision (settledRollouts), and records the ones it
// finds settled.
func activeRollout(ctx context.Context, st *store.Store, settled settledRollouts) (*api.Rollout, error) {
	keys, err := st.View(ctx, store.DirKeys(store.RolloutsDir))
	if err != nil {
		return nil, err
	}
	var read []store.Range
	listed := map[string]bool{}
	for _, kv := range keys.KVs(store.DirKeys(store.RolloutsDir)) {
		name := store.Name(string(kv.Key))
		listed[name] = true
		if rev, ok := settled[name]; !ok || rev != kv.ModRevision {
			read = append(read, store.Key(store.RolloutKey(name)))
		}
	}
	for name := range settled {
		if !listed[name] {
			delete(settled, name)
		}
	}
	var all []*api.Rollout
	if len(read) > 0 {
		v, err := st.ViewAt(ctx, keys.Rev, read...)
		if err != nil {
			return nil, err
		}
		for _, rg := range read {
			for _, kv := range v.KVs(rg) {
				ro := &api.Rollout{}
				if err := store.Decode(kv, ro); err != nil {
					return nil, err
				}
				if settledRollout(ro) {
					settled[ro.Metadata.Name] = kv.ModRevision
					continue
				}
				all = append(all, ro)
			}
		}
	}
	slices.SortStableFunc(all, func(a, b *api.Rollout) int { return a.Metadata.CreatedAt.Compare(b.Metadata.CreatedAt) })
	for _, ro := range all {
		if ro.Status.Operation != "" {
			return ro, nil
		}
	}
	if len(all) > 0 {
		return all[0], nil
	}
	return nil, nil
}

// settledRollouts are the rollouts no pass works on until they change, by
// name, with the revision each was read at. A rollout stays in the store
// once finished, naming each of its nodes: without them every pass, and
// every resync, would read the fleet's whole rollout history.
type settledRollouts map[string]int64

// settledRollout tells whether no pass works on ro as it is: it finished,
// or it halted with no step in flight and no undo asked.
func settledRollout(ro *api.Rollout) bool {
	return ro.Status.Phase.Finished() || (ro.Status.Phase == api.RolloutHalted && !ro.Spec.Undo && ro.Status.Operation == "")
}

// observe reads ro's inputs: the membership controller's observation with
// the nodes' configurations and their liveness, all at one revision, and
// etcd's members beside it. It returns the active operation as read at
// that revision too (nil when none is), for apply to record the step in.
func (r *rollouter) observe(ctx context.Context, ro *api.Rollout) (rollout.Observed, *api.Operation, error) {
	o, err := observe(ctx, r.st, r.admin.Observe, store.Dir(store.NixosConfigsDir), store.Key(store.LivenessKey))
	if err != nil {
		return rollout.Observed{}, nil, err
	}
	cfgs, err := store.ViewObjects[api.NixosConfiguration](o.view, store.NixosConfigsDir)
	if err != nil {
		return rollout.Observed{}, nil, err
	}
	byName := map[string]*api.NixosConfiguration{}
	for _, c := range cfgs {
		byName[c.Metadata.Name] = c
	}
	obs := rollout.Observed{Rollout: ro, ClusterHealthy: true, SlotWanted: r.slots.wanted()}
	if o.cluster != nil {
		obs.ReplaceDeadAfter = policyOf(o.cluster.Spec.Policy, r.policy).ReplaceDeadMembersAfter
	}
	lv := api.NewLiveness()
	if _, err := o.view.Decode(store.LivenessKey, lv); err != nil {
		return rollout.Observed{}, nil, fmt.Errorf("coordinator: observe: %w", err)
	}
	if o.Active != nil {
		obs.ActiveOp = o.Active.Metadata.Name
	}
	leader := false
	var sick, noSpace []string
	for _, m := range o.Members {
		if m.Leader {
			leader = true
		}
		if !m.Learner && !m.Healthy {
			sick = append(sick, m.Name)
		}
		if m.NoSpace {
			noSpace = append(noSpace, m.Name)
		}
	}
	if !leader || len(sick) > 0 {
		obs.ClusterHealthy = false
		obs.ClusterReason = "no etcd leader"
		if len(sick) > 0 {
			obs.ClusterReason = "unhealthy voters: " + strings.Join(sick, ", ")
		}
	}
	if len(noSpace) > 0 {
		// No step while etcd refuses writes (coordinator/etcdnospace.go).
		obs.ClusterHealthy = false
		obs.ClusterReason = "etcd's NOSPACE alarm is raised (reported by " + strings.Join(noSpace, ", ") + "): no rollout step until the space is reclaimed"
	}
	for _, n := range o.Nodes {
		if n.Status.Phase == api.NodeRemoved {
			continue
		}
		rn := rollout.Node{Name: n.Metadata.Name, ControlPlane: n.HasRole(api.RoleControlPlane), Alive: o.Alive[n.Metadata.Name], Config: byName[n.Metadata.Name]}
		if l, ok := lv.Status.Nodes[rn.Name]; ok && l.State == string(membership.LiveDead) {
			rn.DeadSince = l.Since
		}
		for _, m := range o.Members {
			if m.Node == rn.Name {
				rn.Voter, rn.Healthy, rn.Leader, rn.MemberID = !m.Learner, m.Healthy, m.Leader, m.ID
				if len(m.ClientURLs) > 0 {
					rn.ClientURL = m.ClientURLs[0]
				}
			}
		}
		rn.ControlPlane = rollsAsControlPlane(n, rn.MemberID != 0)
		obs.Nodes = append(obs.Nodes, rn)
	}
	r.observeKube(ctx, ro, &obs)
	if err := r.observeAPIServers(ctx, ro, &obs); err != nil {
		return rollout.Observed{}, nil, err
	}
	return obs, o.Active, nil
}

// apply writes the step: the rollout's journal, the nodes' configurations
// (deleted once applied, for a rollout with DeleteConfigurations) and the
// step's slot, all in one fenced transaction. active is the active
// operation as observed (nil: apply reads it); the transaction is guarded
// on it being unchanged since.
func (r *rollouter) apply(ctx context.Context, ro *api.Rollout, obs rollout.Observed, active *api.Operation, s rollout.Step, now time.Time) error {
	var ops []clientv3.Op
	g, err := store.UnchangedGuard(ro)
	if err != nil {
		return err
	}
	guards := []store.Guard{g}
	opName := ro.Status.Operation
	note := ""
	switch s.Action {
	case rollout.None:
		return nil
	case rollout.Wait:
		if !rollout.Journals(ro, s) {
			return nil
		}
	case rollout.Drain:
		if !rollout.Journals(ro, s) {
			return r.kubeAfter(ctx, ro, obs, s) // draining already: evict again
		}
	case rollout.Uncordon, rollout.Halt:
		if err := r.kubeBefore(ctx, ro, s); err != nil {
			return err
		}
	case rollout.Start:
		var held bool
		if note, held, err = r.snapshotBefore(ctx, ro, obs, s, now); err != nil || held {
			return err
		}
	}
	if s.Action == rollout.TransferLeader {
		if err := r.st.Leads(ctx, r.fence); err != nil {
			return err
		}
		if err := r.admin.MoveLeader(ctx, s.LeaderURL, s.To); err != nil {
			return err
		}
	}
	for _, name := range s.Starts() {
		var cur *api.NixosConfiguration
		for _, n := range obs.Nodes {
			if n.Name == name {
				cur = n.Config
			}
		}
		next := rollout.Configure(ro, ro.Node(name), cur)
		next.Status.UpdatedAt = now
		if cur == nil {
			next.Metadata.CreatedAt = now
		}
		// next carries cur's revision (0 when there is none yet).
		g, err := store.UnchangedGuard(next)
		if err != nil {
			return err
		}
		p, err := store.PutObjectOp(next)
		if err != nil {
			return err
		}
		guards, ops = append(guards, g), append(ops, p)
	}
	if s.Action == rollout.MarkDone && ro.Spec.DeleteConfigurations && !ro.Spec.Undo {
		// The nodes applied their release: their configurations go, each
		// guarded on being the one the rollout gave them.
		for _, name := range s.Nodes {
			for _, n := range obs.Nodes {
				if n.Name != name || n.Config == nil {
					continue
				}
				g, err := store.UnchangedGuard(n.Config)
				if err != nil {
					return err
				}
				guards, ops = append(guards, g), append(ops, store.DeleteOp(store.NixosConfigKey(name)))
			}
		}
	}
	release := rollout.Record(ro, s, now, r.name)
	p, err := store.PutObjectOp(ro)
	if err != nil {
		return err
	}
	ops = append(ops, p)
	switch {
	case s.Action == rollout.Start:
		op := api.NewOperation(ro.Status.Operation)
		op.Metadata.CreatedAt = now
		op.Spec = api.OperationSpec{Type: api.OpRolloutStep, Node: strings.Join(s.Nodes, ","), Request: ro.Metadata.Name, StartedBy: r.name}
		op.Status = api.OperationStatus{Phase: api.OpRunning, StepSince: now, Leader: r.name}
		if note != "" {
			op.Record(now, r.name, note)
		}
		op.Record(now, r.name, s.Reason)
		put, err := store.PutObjectOp(op)
		if err != nil {
			return err
		}
		ops = append(ops, put, store.PutValueOp(store.ActiveOpKey, op.Metadata.Name))
		guards = append(guards, store.Guard{Cmp: store.Absent(store.ActiveOpKey), Err: errOpBusy})
	case s.Action == rollout.Extend || (s.Action == rollout.MarkDone && len(s.Extend) > 0):
		// The step's operation stays active and names its nodes.
		op, err := r.stepOp(ctx, opName, active)
		if err != nil {
			return err
		}
		op.Spec.Node = strings.Join(ro.Status.Current, ",")
		op.Record(now, r.name, s.Reason+": "+strings.Join(s.Starts(), ", "))
		put, err := store.PutObjectOp(op)
		if err != nil {
			return err
		}
		g, err := store.UnchangedGuard(op)
		if err != nil {
			return err
		}
		ops = append(ops, put)
		guards = append(guards, g, store.Guard{
			Cmp: store.ValueIs(store.ActiveOpKey, opName),
			Err: fmt.Errorf("coordinator: step %s is no longer the active operation", opName),
		})
	case release && opName != "":
		op, err := r.stepOp(ctx, opName, active)
		if err != nil {
			return err
		}
		op.Status.Phase, op.Status.Step = api.OpSucceeded, api.StepDone
		if s.Action == rollout.Halt {
			op.Status.Phase = api.OpFailed
		}
		op.Record(now, r.name, s.Outcome(ro.Spec.Undo))
		put, err := store.PutObjectOp(op)
		if err != nil {
			return err
		}
		g, err := store.UnchangedGuard(op)
		if err != nil {
			return err
		}
		ops = append(ops, put, store.DeleteOp(store.ActiveOpKey))
		guards = append(guards, g, store.Guard{
			Cmp: store.ValueIs(store.ActiveOpKey, opName),
			Err: fmt.Errorf("coordinator: step %s is no longer the active operation", opName),
		})
	}
	if s.Action == rollout.Start {
		failpoint.Hit(failpoint.CoordBeforeRolloutStep)
	}
	if _, err = r.st.FencedTxn(ctx, r.fence, guards, ops...); err != nil {
		return err
	}
	if s.Action == rollout.Start {
		failpoint.Hit(failpoint.CoordAfterRolloutStep)
	}
	return r.kubeAfter(ctx, ro, obs, s)
}

// stepOp returns the operation named name for a step to record itself in:
// active when it is that operation as observed, else as read now.
func (r *rollouter) stepOp(ctx context.Context, name string, active *api.Operation) (*api.Operation, error) {
	if active != nil && active.Metadata.Name == name {
		return active, nil
	}
	op := &api.Operation{}
	if err := r.st.Get(ctx, store.OpKey(name), op); err != nil {
		return nil, err
	}
	return op, nil
}

// rollsAsControlPlane tells whether node n rolls as a control-plane node
// (one at a time, its etcd member healthy after, the leader last): it has
// the role and is not a standby. A standby has no member to wait for or
// hand leadership from, and rolls like a data-plane node.
func rollsAsControlPlane(n *api.Node, hasMember bool) bool {
	return n.HasRole(api.RoleControlPlane) && (hasMember || n.Status.Phase != api.NodeStandby)
}
