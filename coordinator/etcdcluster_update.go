package coordinator

import (
	"context"
	"errors"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

// etcdClusterAttempts is how many times updateEtcdCluster reads and
// writes the EtcdCluster before it gives up to concurrent writes.
const etcdClusterAttempts = 5

// updateEtcdCluster applies fn to the EtcdCluster as stored in st and writes it
// back fenced and compare-and-swapped on the revision read (a spec applied
// meanwhile is kept); on a concurrent write (a spec, another controller's
// status) it reads again, up to etcdClusterAttempts times, then returns
// the ErrConflict.
func updateEtcdCluster(ctx context.Context, st *store.Store, fence store.Fence, fn func(*api.EtcdCluster)) error {
	for attempt := 1; ; attempt++ {
		ec := &api.EtcdCluster{}
		if err := st.Get(ctx, store.EtcdClusterKey, ec); err != nil {
			return err
		}
		fn(ec)
		_, err := st.PutUnchanged(ctx, fence, ec)
		if err == nil || !errors.Is(err, store.ErrConflict) || attempt >= etcdClusterAttempts {
			return err
		}
	}
}
