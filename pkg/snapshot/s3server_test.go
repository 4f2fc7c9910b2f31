package snapshot_test

import (
	"testing"

	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/snapshot/snapshottest"
)

// weedServer is snapshottest's real SeaweedFS, with the contract test's
// shorthand.
type weedServer struct{ *snapshottest.WeedServer }

// startWeed starts a weed server for the test (skipped without the binary).
func startWeed(t *testing.T) weedServer { return weedServer{snapshottest.StartWeed(t)} }

// store returns an S3 store of bucket with prefix.
func (w weedServer) store(t *testing.T, bucket, prefix string) *snapshot.S3Store {
	return w.Store(t, bucket, prefix)
}
