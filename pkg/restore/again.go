package restore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrRestoredAlready refuses to restore, without Request.Again, a live
// cluster that is itself the product of a restore: what it acknowledged
// since would be discarded.
var ErrRestoredAlready = errors.New("restore: the live cluster was restored already")

// checkRestoredAgain refuses, unless again, a live cluster whose lineage
// says it was made by a restore, naming that restore and how many
// revisions (acknowledged writes) it has committed since.
func checkRestoredAgain(ctx context.Context, cli *clientv3.Client, prefix string, lin liveLineage, again bool) error {
	if again || len(lin.earlier) == 0 {
		return nil
	}
	// The last cluster the lineage lists was replaced by the live one's
	// restore.
	by := lin.earlier[len(lin.earlier)-1].By
	kv, rev, err := store.GetUnder(ctx, cli, prefix, store.OpKey(by))
	if err != nil {
		return fmt.Errorf("restore: read the live cluster's restore %s: %w", by, err)
	}
	since := "its history since then"
	if kv != nil {
		var op api.Operation
		when := ""
		if decodeJSON(kv.Value, &op) == nil && !op.Status.UpdatedAt.IsZero() {
			when = " (done " + op.Status.UpdatedAt.UTC().Format(time.RFC3339) + ")"
		}
		n := rev - kv.CreateRevision
		since = fmt.Sprintf("the %d revisions it has committed since%s, revisions %d to %d", n, when, kv.CreateRevision+1, rev)
	}
	return fmt.Errorf("%w: cluster %s is the product of %s; restoring it again discards %s, every write acknowledged meanwhile: pass --again to do so (nothing was changed)",
		ErrRestoredAlready, lin.id, by, since)
}
