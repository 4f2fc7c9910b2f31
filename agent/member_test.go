package agent

import (
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/member"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
)

func TestStaleReason(t *testing.T) {
	const peer = "http://127.0.0.1:2380"
	view := clusterState{clusterID: 0xc1, members: []*etcdserverpb.Member{
		{ID: 0xa, PeerURLs: []string{"http://127.0.0.2:2380"}},
		{ID: 0xb, PeerURLs: []string{peer}},
	}}
	tests := []struct {
		name      string
		view      clusterState
		marker    member.Marker
		hasMarker bool
		want      string // "" means the data dir may be restarted
	}{
		{"own member, marker agrees", view, member.Marker{MemberID: 0xb, ClusterID: 0xc1}, true, ""},
		{"own member, no marker yet (killed before writing it)", view, member.Marker{}, false, ""},
		{"another cluster", view, member.Marker{MemberID: 0xb, ClusterID: 0xc2}, true, "belongs to cluster 00000000000000c2, the running cluster is 00000000000000c1"},
		{"member removed", clusterState{clusterID: 0xc1, members: view.members[:1]}, member.Marker{MemberID: 0xb, ClusterID: 0xc1}, true, "member 000000000000000b was removed"},
		{"no member at this peer URL, no marker", clusterState{clusterID: 0xc1, members: view.members[:1]}, member.Marker{}, false, "no member of the cluster has this node's peer URL"},
		{"peer URL taken by a newer member", view, member.Marker{MemberID: 0xe, ClusterID: 0xc1}, true, "belongs to member 000000000000000e, the cluster has 000000000000000b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := staleReason(tt.view, tt.marker, tt.hasMarker, peer)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Fatalf("staleReason = %q, want %q", got, tt.want)
			}
		})
	}
}
