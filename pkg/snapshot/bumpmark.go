package snapshot

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/protobuf/proto"
)

// bumpMarked tells whether the snapshot at path holds the empty-keyed
// entry etcd's restore writes at the bumped revision (etcdutl snapshot
// restore --bump-revision): a snapshot of a cluster restored that way
// keeps it, etcdutl's status counts it as a key, and no member serves it.
func bumpMarked(path string) (bool, error) {
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return false, fmt.Errorf("snapshot: %s: open database: %w", path, err)
	}
	defer db.Close()
	marked := false
	err = db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return nil
		}
		return b.ForEach(func(rev, v []byte) error {
			kv := &mvccpb.KeyValue{}
			if err := proto.Unmarshal(v, kv); err != nil {
				return fmt.Errorf("decode the key at revision %x: %w", rev, err)
			}
			if len(kv.Key) == 0 {
				// A tombstone's revision carries a trailing 't'.
				marked = len(rev) <= 17 || rev[17] != 't'
			}
			return nil
		})
	})
	if err != nil {
		return false, fmt.Errorf("snapshot: %s: %w", path, err)
	}
	return marked, nil
}
