package snapshot_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/snapshot/snapshottest"
	"github.com/homystack/nico/pkg/snapshot/storetest"
)

func TestDirStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) snapshot.Store {
		st, err := snapshot.NewDirStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}

func TestMemStoreContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) snapshot.Store { return snapshottest.NewMem() })
}

// TestS3StoreContract runs the contract against a real S3-compatible
// server, SeaweedFS's weed (tests/weedbin/build.sh): one bucket, a prefix
// per case (each new bucket is a SeaweedFS collection that grows volumes of
// its own).
func TestS3StoreContract(t *testing.T) {
	w := startWeed(t)
	if err := w.store(t, "contract", "").EnsureBucket(context.Background()); err != nil {
		t.Fatalf("bucket: %v", err)
	}
	n := 0
	storetest.Run(t, func(t *testing.T) snapshot.Store {
		n++
		return w.store(t, "contract", fmt.Sprintf("case-%d/etcd", n))
	})
	t.Run("SaveThenVerifyStored", func(t *testing.T) {
		c := etcdtest.Start(t, 1)
		cli := c.Client(t)
		ctx := context.Background()
		for i := range 10 {
			if _, err := cli.Put(ctx, fmt.Sprintf("/s3/%d", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		st := w.store(t, "contract", "drill")
		src := snapshot.Source{Name: c.Members[0].Name, ClientURL: c.Members[0].ClientURL}
		m, err := snapshot.Save(ctx, src, etcdclient.TLSOf(cli), st, snapshot.TakeOptions{Dir: t.TempDir(), Reason: snapshot.ReasonOnDemand})
		if err != nil {
			t.Fatalf("Save to S3: %v", err)
		}
		got, res, err := snapshot.VerifyStored(ctx, st, m.Name, snapshot.VerifyOptions{Dir: t.TempDir(), ExpectCluster: m.ClusterID})
		if err != nil {
			t.Fatalf("VerifyStored from S3: %v", err)
		}
		if got.SHA256 != m.SHA256 || res.Keys != 10 || res.Revision != m.Revision {
			t.Fatalf("VerifyStored = %+v %+v, want 10 keys at revision %d", got, res, m.Revision)
		}
	})
}
