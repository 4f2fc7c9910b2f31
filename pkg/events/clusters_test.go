package events

import (
	"fmt"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
)

func kcluster(f func(c *api.KubernetesCluster)) *api.KubernetesCluster {
	c := api.NewKubernetesCluster("prod")
	c.Metadata.CreatedAt = at(0)
	c.Spec.Version = "1.37.2"
	c.Status = api.KubernetesClusterStatus{Phase: api.ClusterProvisioning, UpdatedAt: at(3), Conditions: []api.ClusterCondition{
		{Type: api.CondEtcdReady, Status: api.ConditionTrue, LastTransitionTime: at(1)},
		{Type: api.CondAPIServerReady, Status: api.ConditionFalse, Reason: "Probing", Message: "0 of 3 ready", LastTransitionTime: at(2)},
	}}
	if f != nil {
		f(c)
	}
	return c
}

func TestDeriveCluster(t *testing.T) {
	cases := []struct {
		name      string
		prev, cur *api.KubernetesCluster
		want      []string // "Type Reason @second"
		msg       string
	}{
		{"read whole: created, then its conditions in order", nil, kcluster(nil),
			[]string{"Normal ClusterCreated @0", "Normal EtcdReady @1", "Warning NotAPIServerReady @2"}, "KubernetesCluster prod created (generation 1, version 1.37.2)"},
		{"ready", kcluster(nil), kcluster(func(c *api.KubernetesCluster) {
			c.Status.Phase, c.Status.UpdatedAt = api.ClusterReady, at(5)
			c.Status.Conditions[1] = api.ClusterCondition{Type: api.CondAPIServerReady, Status: api.ConditionTrue, LastTransitionTime: at(4)}
		}), []string{"Normal APIServerReady @4", "Normal ClusterReady @5"}, "prod APIServerReady=True"},
		{"a new generation and a deletion request", kcluster(nil), kcluster(func(c *api.KubernetesCluster) {
			d := at(6)
			c.Metadata.Generation, c.Metadata.DeletionTimestamp = 2, &d
		}), []string{"Normal ClusterDeletionRequested @6", "Normal ClusterSpecChanged @50"}, ""},
		{"deleted", kcluster(nil), nil, []string{"Normal ClusterDeleted @50"}, "nothing of it is left"},
		{"failed is a warning", kcluster(nil), kcluster(func(c *api.KubernetesCluster) {
			c.Status.Phase, c.Status.Message, c.Status.UpdatedAt = api.ClusterFailed, "machine cp-9 does not exist", at(7)
		}), []string{"Warning ClusterFailed @7"}, "Provisioning -> Failed: machine cp-9 does not exist"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var prev, cur []byte
			if tc.prev != nil {
				prev = enc(t, tc.prev)
			}
			if tc.cur != nil {
				cur = enc(t, tc.cur)
			}
			evs, err := Derive(Change{Key: store.ClusterKey("prod"), Prev: prev, Cur: cur, Revision: 9, At: at(50)})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range evs {
				got = append(got, fmt.Sprintf("%s %s @%d", e.Type, e.Reason, int(e.Time.Sub(t0).Seconds())))
				if e.Kind != api.KindKubernetesCluster || e.Name != "prod" {
					t.Errorf("event %+v: want KubernetesCluster/prod", e)
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if tc.msg != "" && !strings.Contains(evs[0].Message, tc.msg) {
				t.Errorf("message %q lacks %q", evs[0].Message, tc.msg)
			}
		})
	}
}
