package membership

import "github.com/homystack/nico/pkg/api"

// ExternalStarts returns what status.external should hold: for the
// external member whose learner is in flight (the active join at its
// learner step, the learner still one), the values it must start etcd
// with, as already published when they were (the values etcd returned
// when it was added), else rendered from the members. Nil when no external
// member is in flight: a promoted or removed one needs them no longer. It
// is pure.
func ExternalStarts(o Observed, published []api.ExternalMemberStart) []api.ExternalMemberStart {
	op := o.Active
	if op == nil || op.Spec.Type != api.OpJoin || !op.Spec.External || op.Status.Step != api.StepLearner {
		return nil
	}
	m := o.memberByID(op.Spec.MemberID)
	if m == nil || !m.Learner {
		return nil
	}
	for _, p := range published {
		if p.Name == op.Spec.Node {
			return []api.ExternalMemberStart{p}
		}
	}
	return []api.ExternalMemberStart{ExternalStart(op.Spec.Node, InitialCluster(o.Members, m.ID, op.Spec.Node))}
}

// ExternalStart is external member name's start values for --initial-cluster initial.
func ExternalStart(name, initial string) api.ExternalMemberStart {
	return api.ExternalMemberStart{Name: name, InitialCluster: initial, InitialClusterState: "existing"}
}
