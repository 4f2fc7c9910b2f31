package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/store"
)

// The database quota (etcd's --quota-backend-bytes) a member starts with
// is the EtcdCluster's spec.policy.quotaBackendBytes. The agent reads it
// with its join request and keeps it current with the etcd-quota
// controller; every start of the member takes the value known then:
//
//	spec read (join, the watch,   use it (0: etcd's default)
//	the restart's cluster view)
//	not read yet (a restart       the quota the data dir last ran with
//	before the store answers)     (its marker); none: etcd's default
//
// A running member keeps the quota it started with: a changed value
// applies at its next start (an agent restart, an etcd version step, a
// rejoin). The EtcdCluster's status shows each member's quota
// (members[].dbSizeQuota), so a member still on the old one can be seen.

// quotaResync is the etcd-quota controller's resync tick, besides its watch.
const quotaResync = time.Minute

// quotaWatch is the controller that follows spec.policy.quotaBackendBytes.
func (a *Agent) quotaWatch() controller.Controller {
	return &controller.Func{ControllerName: "etcd-quota", Prefixes: []string{store.EtcdClusterKey}, Resync: quotaResync, Do: func(ctx context.Context) error {
		ec := &api.EtcdCluster{}
		err := a.store().Get(ctx, store.EtcdClusterKey, ec)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return nil
		case err != nil:
			return fmt.Errorf("agent: read the EtcdCluster's quota: %w", err)
		}
		q := ec.Spec.Policy.QuotaBackendBytes
		if old := a.etcd.wantQuota.Swap(q); old != q && a.state.memberRunning() && q != a.etcd.quota.Load() {
			a.log.Info("the EtcdCluster asks for another database quota; the member takes it at its next start",
				"quotaBackendBytes", q, "running", a.etcd.quota.Load())
		}
		return nil
	}}
}
