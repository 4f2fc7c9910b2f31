package restore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
)

// ErrBadSnapshot is wrapped by every refusal of a snapshot file: missing,
// truncated, with a wrong hash, not an etcd database, or not of this fleet.
var ErrBadSnapshot = errors.New("restore: bad snapshot")

// Info is what Verify learned from a snapshot file.
type Info struct {
	Path string `json:"path"`
	// Name and Where are the snapshot's name and store when nicoctl
	// fetched it from the snapshot store ("" for a file it was given).
	Name     string `json:"name,omitempty"`
	Where    string `json:"where,omitempty"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Revision int64  `json:"revision"`
	Keys     int    `json:"keys"`
	// EtcdVersion is the storage version the snapshot records ("" before 3.6).
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// Fleet is the createdAt of the snapshot's EtcdCluster object: the
	// fleet's identity (zero when the snapshot holds none).
	Fleet time.Time `json:"fleet,omitzero"`
	// HasFleet tells whether the snapshot holds an EtcdCluster at all.
	HasFleet bool `json:"hasFleet"`
	// Nodes are the nodes registered in the snapshot.
	Nodes []string `json:"nodes,omitempty"`
	// Clusters are the etcd cluster IDs its Node records name (the
	// cluster it was taken from), and Lineage the earlier clusters its
	// ClusterLineage lists.
	Clusters []api.MemberID       `json:"clusters,omitempty"`
	Lineage  []api.EarlierCluster `json:"lineage,omitempty"`
	// Voters are the names of the voting members of the cluster the
	// snapshot was taken from (etcd's own membership, kept in the
	// snapshot); control-plane hosts that are not among them were
	// standbys.
	Voters []string `json:"voters,omitempty"`
}

// Verify checks a snapshot file the way etcd's snapshot restore does (the
// sha256 etcd appends to a snapshot, then the bolt database) and reads its
// revision, key count and nico's fleet identity under prefix.
func Verify(path, prefix string) (Info, error) {
	info := Info{Path: path}
	f, err := os.Open(path)
	if err != nil {
		return info, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return info, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	info.Size = st.Size()
	// etcd's snapshot is a bolt file (a multiple of 512 bytes) followed by
	// the sha256 of it.
	if info.Size < 512+sha256.Size || info.Size%512 != sha256.Size {
		return info, fmt.Errorf("%w: %s is %d bytes, want a bolt database (a multiple of 512 bytes) followed by its 32-byte sha256, as etcd's snapshot save writes: truncated or not an etcd snapshot", ErrBadSnapshot, path, info.Size)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, f, info.Size-sha256.Size); err != nil {
		return info, fmt.Errorf("%w: read %s: %w", ErrBadSnapshot, path, err)
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return info, fmt.Errorf("%w: read %s: %w", ErrBadSnapshot, path, err)
	}
	got := h.Sum(nil)
	if !bytes.Equal(got, want) {
		return info, fmt.Errorf("%w: %s: sha256 of the data is %x, the snapshot records %x: truncated or corrupted", ErrBadSnapshot, path, got, want)
	}
	info.SHA256 = hex.EncodeToString(got)
	status, err := statusOf(path)
	if err != nil {
		return info, fmt.Errorf("%w: %s: %w", ErrBadSnapshot, path, err)
	}
	info.Revision, info.Keys, info.EtcdVersion = status.Revision, status.TotalKey, status.Version
	if err := readFleet(path, prefix, &info); err != nil {
		return info, fmt.Errorf("%w: %s: %w", ErrBadSnapshot, path, err)
	}
	return info, nil
}

// statusOf is etcdutl's snapshot status, with its panics (a file bolt
// cannot read) turned into errors.
func statusOf(path string) (st snapshot.Status, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("not an etcd database: %v", r)
		}
	}()
	return snapshot.NewV3(zap.NewNop()).Status(path)
}

// readFleet reads the latest version of nico's EtcdCluster and Node keys.
func readFleet(path, prefix string, info *Info) error {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("open bolt database: %w", err)
	}
	defer db.Close()
	clusterKey := prefix + store.EtcdClusterKey
	lineageKey := prefix + store.ClusterLineageKey
	nodesDir := prefix + store.NodesDir
	latest := map[string][]byte{}
	err = db.View(func(tx *bolt.Tx) error {
		if mb := tx.Bucket([]byte("members")); mb != nil {
			_ = mb.ForEach(func(_, v []byte) error {
				var m struct {
					Name      string `json:"name"`
					IsLearner bool   `json:"isLearner"`
				}
				if json.Unmarshal(v, &m) == nil && m.Name != "" && !m.IsLearner {
					info.Voters = append(info.Voters, m.Name)
				}
				return nil
			})
			slices.Sort(info.Voters)
		}
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return errors.New("no key bucket: not an etcd v3 database")
		}
		return b.ForEach(func(rev, v []byte) error {
			kv := &mvccpb.KeyValue{}
			if err := proto.Unmarshal(v, kv); err != nil {
				return fmt.Errorf("decode key at revision %x: %w", rev, err)
			}
			k := string(kv.Key)
			if k != clusterKey && k != lineageKey && !strings.HasPrefix(k, nodesDir) {
				return nil
			}
			if len(rev) > 17 && rev[17] == 't' { // a tombstone
				delete(latest, k)
				return nil
			}
			latest[k] = kv.Value
			return nil
		})
	})
	if err != nil {
		return err
	}
	for k, v := range latest {
		if strings.HasPrefix(k, nodesDir) {
			info.Nodes = append(info.Nodes, strings.TrimPrefix(k, nodesDir))
			var n api.Node
			if json.Unmarshal(v, &n) == nil && n.Status.ClusterID != 0 && !slices.Contains(info.Clusters, n.Status.ClusterID) {
				info.Clusters = append(info.Clusters, n.Status.ClusterID)
			}
		}
	}
	slices.Sort(info.Nodes)
	slices.Sort(info.Clusters)
	if v, ok := latest[lineageKey]; ok {
		var l api.ClusterLineage
		if err := json.Unmarshal(v, &l); err != nil {
			return fmt.Errorf("decode %s: %w", lineageKey, err)
		}
		info.Lineage = l.Status.Earlier
	}
	if v, ok := latest[clusterKey]; ok {
		var c api.EtcdCluster
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("decode %s: %w", clusterKey, err)
		}
		info.Fleet, info.HasFleet = c.Metadata.CreatedAt, true
	}
	return nil
}

// CheckFleet refuses a snapshot that holds no EtcdCluster, that is not of
// the fleet whose EtcdCluster was created at fleet (when live: the live
// cluster answered and holds one), or that has no Node record for target.
func CheckFleet(info Info, fleet time.Time, live bool, target string) error {
	if !info.HasFleet {
		return fmt.Errorf("%w: %s holds no nico EtcdCluster object: not a snapshot of a nico fleet (or taken under another store.prefix)", ErrBadSnapshot, info.Path)
	}
	if live && !fleet.Equal(info.Fleet) {
		return fmt.Errorf("%w: %s is a snapshot of another cluster: its EtcdCluster was created at %s, this fleet's at %s", ErrBadSnapshot, info.Path, info.Fleet.UTC().Format(time.RFC3339Nano), fleet.UTC().Format(time.RFC3339Nano))
	}
	for _, n := range info.Nodes {
		if n == target {
			return nil
		}
	}
	return fmt.Errorf("%w: %s has no node %q registered (it has %v): not a snapshot of the cluster that target served", ErrBadSnapshot, info.Path, target, info.Nodes)
}

func decodeJSON(b []byte, v any) error { return json.Unmarshal(b, v) }
