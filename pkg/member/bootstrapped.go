package member

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Bootstrapped records that an agent created a new etcd cluster in a data
// dir. It is kept beside the data dir ("<dir>.bootstrapped"), not in it,
// so that it outlives the member's data: a bootstrap host whose data is
// lost must not bootstrap again. A second cluster with the same name, peer
// URL and token has the same member and cluster IDs as the first, and
// would serve an empty keyspace beside it.
type Bootstrapped struct {
	ClusterID uint64    `json:"clusterID"`
	MemberID  uint64    `json:"memberID"`
	At        time.Time `json:"at"`
}

// BootstrappedPath is where dir's Bootstrapped record is kept.
func BootstrappedPath(dir string) string { return filepath.Clean(dir) + ".bootstrapped" }

// WriteBootstrapped writes b beside dir, atomically.
func WriteBootstrapped(dir string, b Bootstrapped) error {
	return writeJSON(BootstrappedPath(dir), "bootstrap record", b)
}

// ReadBootstrapped reads dir's Bootstrapped record; ok is false, with a nil
// error, when there is none.
func ReadBootstrapped(dir string) (b Bootstrapped, ok bool, err error) {
	path := BootstrappedPath(dir)
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Bootstrapped{}, false, nil
	}
	if err != nil {
		return Bootstrapped{}, false, fmt.Errorf("member: read bootstrap record: %w", err)
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return Bootstrapped{}, false, fmt.Errorf("member: decode bootstrap record %s: %w", path, err)
	}
	return b, true, nil
}
