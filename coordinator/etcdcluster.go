package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
)

// The fleet's EtcdCluster is the membership policy every candidate plans
// with. A leader that finds none writes the first one, fenced, from its own
// configuration (coordinator.* settings): those are only the bootstrap
// defaults; from then on the object decides.

// bootstrapCluster returns the EtcdCluster a leader writes when the store
// has none: this candidate's policy, and DefaultVoters unless the cluster
// already has more voters (an existing cluster is never shrunk by an
// upgrade of nico), then the smallest allowed count that keeps them all.
func (d membershipDeps) bootstrapCluster(now time.Time, members []membership.Member) *api.EtcdCluster {
	ec := api.NewEtcdCluster()
	ec.Metadata.CreatedAt = now
	voters := 0
	for _, m := range members {
		if !m.Learner {
			voters++
		}
	}
	for _, n := range api.AllowedVoters {
		if n >= voters && n >= api.DefaultVoters {
			ec.Spec.Voters = n
			break
		}
	}
	if voters > api.AllowedVoters[len(api.AllowedVoters)-1] {
		ec.Spec.Voters = api.AllowedVoters[len(api.AllowedVoters)-1]
	}
	p := d.policy
	ec.Spec.Policy = api.EtcdPolicy{
		LearnerStartTimeout:     api.Duration(p.LearnerStartTimeout),
		LearnerProgressTimeout:  api.Duration(p.LearnerProgressTimeout),
		HealthTimeout:           api.Duration(d.healthTimeout),
		ReplaceDeadMembersAfter: api.Duration(p.ReplaceDeadMembersAfter),
	}
	return ec
}

// ensureCluster writes the bootstrap EtcdCluster when the observation has
// none, fenced and only while the key is absent, and returns the one to
// plan with: the stored one, or the one just written (or, when another
// write won, that one on the next pass). Its spec.policy.healthTimeout
// (unset: this candidate's setting) bounds the leader's calls to each
// member from then on.
func (d membershipDeps) ensureCluster(ctx context.Context, o *observation, now time.Time) (*api.EtcdCluster, error) {
	ec, err := d.storedOrBootstrapCluster(ctx, o, now)
	if err != nil {
		return nil, err
	}
	d.admin.SetHealthTimeout(healthTimeoutOf(ec.Spec.Policy, d.healthTimeout))
	return ec, nil
}

// healthTimeoutOf is the policy's health timeout, or fallback when unset.
func healthTimeoutOf(p api.EtcdPolicy, fallback time.Duration) time.Duration {
	if p.HealthTimeout > 0 {
		return time.Duration(p.HealthTimeout)
	}
	return fallback
}

// storedOrBootstrapCluster is ensureCluster's read-or-write.
func (d membershipDeps) storedOrBootstrapCluster(ctx context.Context, o *observation, now time.Time) (*api.EtcdCluster, error) {
	if o.cluster != nil {
		return o.cluster, nil
	}
	ec := d.bootstrapCluster(now, o.Members)
	op, err := store.PutObjectOp(ec)
	if err != nil {
		return nil, err
	}
	exists := errors.New("coordinator: the EtcdCluster was written meanwhile")
	_, err = d.st.FencedTxn(ctx, d.fence, []store.Guard{{Cmp: store.Absent(store.EtcdClusterKey), Err: exists}}, op)
	switch {
	case errors.Is(err, exists):
		return ec, nil
	case err != nil:
		return nil, fmt.Errorf("coordinator: writing the bootstrap EtcdCluster: %w", err)
	}
	d.log.Info("wrote the bootstrap EtcdCluster from this candidate's settings", "voters", ec.Spec.Voters)
	return ec, nil
}

// policyOf is the planner's policy from the object, each unset field taken
// from fallback.
func policyOf(p api.EtcdPolicy, fallback membership.Policy) membership.Policy {
	out := fallback
	if p.LearnerStartTimeout > 0 {
		out.LearnerStartTimeout = time.Duration(p.LearnerStartTimeout)
	}
	if p.LearnerProgressTimeout > 0 {
		out.LearnerProgressTimeout = time.Duration(p.LearnerProgressTimeout)
	}
	out.ReplaceDeadMembersAfter = time.Duration(p.ReplaceDeadMembersAfter)
	return out
}
