package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// kinds makes an empty object of every stored kind, by kind.
var kinds = map[string]func() api.Object{
	api.KindNode:          func() api.Object { return new(api.Node) },
	api.KindJoinRequest:   func() api.Object { return new(api.JoinRequest) },
	api.KindRemoveRequest: func() api.Object { return new(api.RemoveRequest) },
	api.KindOperation:     func() api.Object { return new(api.Operation) },
	"Liveness":            func() api.Object { return new(api.Liveness) },
	"GossipKey":           func() api.Object { return new(api.GossipKey) },
	"Machine":             func() api.Object { return new(api.Machine) },
	"MachinePool":         func() api.Object { return new(api.MachinePool) },
	"Hypervisor":          func() api.Object { return new(api.Hypervisor) },
	"NixosConfiguration":  func() api.Object { return new(api.NixosConfiguration) },
	"Rollout":             func() api.Object { return new(api.Rollout) },
	"Token":               func() api.Object { return new(api.Token) },
	"EtcdCluster":         func() api.Object { return new(api.EtcdCluster) },
	"KubernetesCluster":   func() api.Object { return new(api.KubernetesCluster) },
}

// FuzzDecode feeds decode values as any etcd client allowed to write the key
// could have stored them, into every kind. A value is either refused with an
// error naming the key, or an object of this apiVersion whose encoding
// decodes back to the same object (so what the coordinator reads is what it
// would write).
func FuzzDecode(f *testing.F) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	n := api.NewNode("cp-1")
	n.Spec.Roles = []api.Role{api.RoleControlPlane}
	n.Status.MemberID, n.Status.ClusterID, n.Status.UpdatedAt = 0xdeadbeef, 1<<63, now
	r := api.NewRollout("r1")
	r.Spec.StepTimeout, r.Spec.MaxUnavailable = api.Duration(90*time.Second), "25%"
	for _, o := range []api.Object{n, r, api.NewJoinRequest("w1"), api.NewRemoveRequest("w2"), api.NewOperation("op-1"),
		api.NewLiveness(), api.NewEtcdCluster(), api.NewGossipKey(), api.NewMachine("m-0"), api.NewMachinePool("p"), api.NewHypervisor("hv"),
		api.NewNixosConfiguration("w1"), api.NewToken("abcdef"), api.NewKubernetesCluster("k1")} {
		b, err := json.Marshal(o)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"apiVersion":"nico.homystack.io/v1","kind":"Node","status":{"memberID":"0x1g","updatedAt":"2026-13-01T00:00:00Z"}}`))
	f.Add([]byte(`{"apiVersion":"nico.homystack.io/v2","kind":"Node"}`))
	f.Add([]byte(`{"apiVersion":"nico.homystack.io/v1","spec":{"stepTimeout":"-5m","maxUnavailable":"150%"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, value []byte) {
		for kind, mk := range kinds {
			obj := mk()
			if err := decode([]byte("k"), value, 7, obj); err != nil {
				if !strings.HasPrefix(err.Error(), "store: ") || !strings.Contains(err.Error(), "k") {
					t.Fatalf("%s: error %q does not name the store and key", kind, err)
				}
				continue
			}
			if obj.GetTypeMeta().APIVersion != api.APIVersionFor(obj) || obj.GetMetadata().Revision != 7 {
				t.Fatalf("%s: decoded %+v %+v", kind, *obj.GetTypeMeta(), *obj.GetMetadata())
			}
			if ro, ok := obj.(*api.Rollout); ok {
				_, _ = ro.Spec.BatchSize(3) // refuses or sizes; never panics
			}
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatalf("%s: decoded object does not encode: %v", kind, err)
			}
			again := mk()
			if err := decode([]byte("k"), b, 7, again); err != nil {
				t.Fatalf("%s: re-encoding %s does not decode: %v", kind, b, err)
			}
			if !reflect.DeepEqual(obj, again) {
				t.Fatalf("%s: round trip changed the object:\n%+v\n%+v", kind, obj, again)
			}
		}
	})
}
