package snapshot_test

import (
	"testing"

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
