package store

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// BenchmarkObjectsReread reads a directory of 1 000 Nodes that did not
// change since the last read, as a controller pass does: decoded anew (the
// baseline) and copied from what was decoded before.
//
//	go test -run '^$' -bench ObjectsReread -benchmem ./pkg/store/
func BenchmarkObjectsReread(b *testing.B) {
	var kvs []*mvccpb.KeyValue
	for i := range 1000 {
		n := api.NewNode(fmt.Sprintf("bench-node-%04d", i))
		n.Spec.Roles = []api.Role{api.RoleWorker}
		n.Spec.Labels = map[string]string{api.LabelTopology: fmt.Sprint("rack-", i%10)}
		n.Status.Phase, n.Status.AgentVersion, n.Status.UpdatedAt = api.NodeRegistered, "v1.0.0", time.Unix(1_800_000_000, 0).UTC()
		n.Status.GossipAddr = fmt.Sprintf("10.0.%d.%d:7946", i/250, i%250)
		n.Status.DataDir = &api.DataDirStatus{FreeBytes: 1 << 34, SizeBytes: 1 << 35, MeasuredAt: n.Status.UpdatedAt}
		raw, err := json.Marshal(n)
		if err != nil {
			b.Fatal(err)
		}
		kvs = append(kvs, &mvccpb.KeyValue{Key: []byte("nodes/" + n.Metadata.Name), Value: raw, ModRevision: int64(i + 1)})
	}
	b.Run("decode", func(b *testing.B) {
		for b.Loop() {
			for _, kv := range kvs {
				if err := decode(kv.Key, kv.Value, kv.ModRevision, &api.Node{}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := Objects[api.Node](kvs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
