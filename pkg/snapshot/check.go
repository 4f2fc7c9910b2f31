package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
)

// trailerSize is the sha256 etcd appends to a streamed snapshot.
const trailerSize = sha256.Size

// sectorSize: etcd pads nothing, but a bolt database is a whole number of
// pages, so a streamed snapshot is 32 bytes past a multiple of 512.
const sectorSize = 512

// Check reads the snapshot file at path as `etcdutl snapshot status` does:
// its appended sha256 must match the database, and the database must pass
// bolt's integrity check; it then returns the revision, the live keys,
// the size and etcd's hash. A truncated or altered file is ErrCorrupt.
func Check(path string) (Status, error) {
	f, err := os.Open(path)
	if err != nil {
		return Status{}, fmt.Errorf("snapshot: check: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Status{}, fmt.Errorf("snapshot: check: %w", err)
	}
	size := fi.Size()
	if size < sectorSize+trailerSize || size%sectorSize != trailerSize {
		return Status{}, fmt.Errorf("%w: %s: %d bytes is not a streamed snapshot's size (a whole number of 512-byte sectors and etcd's 32-byte sha256): truncated, or not taken with Maintenance.Snapshot", ErrCorrupt, path, size)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-trailerSize); err != nil {
		return Status{}, fmt.Errorf("snapshot: check %s: read: %w", path, err)
	}
	want := make([]byte, trailerSize)
	if _, err := io.ReadFull(f, want); err != nil {
		return Status{}, fmt.Errorf("snapshot: check %s: read sha256: %w", path, err)
	}
	got := h.Sum(nil)
	if hex.EncodeToString(got) != hex.EncodeToString(want) {
		return Status{}, fmt.Errorf("%w: %s: sha256 of the database is %x, the snapshot says %x: truncated or altered", ErrCorrupt, path, got, want)
	}
	st, err := etcdutl.NewV3(zap.NewNop()).Status(path)
	if err != nil {
		return Status{}, fmt.Errorf("%w: %s: %w", ErrCorrupt, path, err)
	}
	return Status{
		SHA256:         hex.EncodeToString(want),
		Size:           size,
		Revision:       st.Revision,
		TotalKeys:      st.TotalKey,
		Hash:           st.Hash,
		StorageVersion: st.Version,
	}, nil
}
