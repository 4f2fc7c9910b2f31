package firstboot

import (
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/hypervisor"
)

// TestMemberEnv: a control-plane VM's etcd URLs are on the address of its
// route to its first etcd endpoint, else its first seed; a worker gets
// none; no endpoint or seed, no route, or a loopback source for a remote
// cluster is an error naming what is missing.
func TestMemberEnv(t *testing.T) {
	routes := map[string]string{"10.77.0.1:2379": "10.77.0.23", "10.77.0.1:7946": "10.77.0.24", "127.0.0.1:7946": "127.0.0.1", "10.9.0.1:7946": "127.0.0.1"}
	local := func(target string) (net.IP, error) {
		if ip, ok := routes[target]; ok {
			return net.ParseIP(ip), nil
		}
		return nil, errors.New("network is unreachable")
	}
	cp := []string{"controlPlane"}
	for _, tc := range []struct {
		name       string
		id         hypervisor.Identity
		peer, says string
	}{
		{"endpoint first", hypervisor.Identity{Name: "v", Roles: cp, Endpoints: []string{"https://10.77.0.1:2379"}, Seeds: []string{"10.77.0.1:7946"}}, "https://10.77.0.23:2380", ""},
		{"seed", hypervisor.Identity{Name: "v", Roles: cp, Seeds: []string{"10.77.0.1:7946"}}, "https://10.77.0.24:2380", ""},
		{"a loopback fleet", hypervisor.Identity{Name: "v", Roles: cp, Seeds: []string{"127.0.0.1:7946"}}, "https://127.0.0.1:2380", ""},
		{"worker", hypervisor.Identity{Name: "v", Roles: []string{"worker"}, Seeds: []string{"10.77.0.1:7946"}}, "", ""},
		{"nothing to route to", hypervisor.Identity{Name: "v", Roles: cp}, "", "no etcd endpoint or gossip seed"},
		{"no route", hypervisor.Identity{Name: "v", Roles: cp, Seeds: []string{"10.8.0.1:7946"}}, "", "network is unreachable"},
		{"loopback source for a remote seed", hypervisor.Identity{Name: "v", Roles: cp, Seeds: []string{"10.9.0.1:7946"}}, "", "which the cluster cannot reach it on"},
		{"endpoint without a port", hypervisor.Identity{Name: "v", Roles: cp, Endpoints: []string{"https://10.77.0.1"}}, "", "want a URL with a host and a port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := MemberEnv(tc.id, local)
			if tc.says != "" {
				if err == nil || !strings.Contains(err.Error(), tc.says) {
					t.Fatalf("err %v, want it saying %q", err, tc.says)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if env["NICO_ETCD_PEERURL"] != tc.peer {
				t.Fatalf("env %v, want peer URL %q", env, tc.peer)
			}
			if tc.peer != "" && env["NICO_ETCD_CLIENTURL"] != strings.Replace(tc.peer, ":2380", ":2379", 1) {
				t.Fatalf("env %v: client URL", env)
			}
		})
	}
}

// TestRouteAddr: the real route lookup finds loopback for a loopback target.
func TestRouteAddr(t *testing.T) {
	ip, err := RouteAddr("127.0.0.1:2379")
	if err != nil || !ip.IsLoopback() {
		t.Fatalf("RouteAddr: %v, %v", ip, err)
	}
}
