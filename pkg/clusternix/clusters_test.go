package clusternix_test

import "github.com/homystack/nico/pkg/clusternix"

// The clusters the tests render, by the name of their golden file in
// testdata/ (NAME.cluster.nix).
var clusters = map[string]func() clusternix.Cluster{
	// k3s HA on nico's etcd: three servers, two agents; unsorted input.
	"nico-ha": func() clusternix.Cluster {
		return clusternix.Cluster{
			Name:                 "prod",
			Version:              "v1.37.2",
			ControlPlaneEndpoint: clusternix.Endpoint{Host: "10.0.0.10", Port: 6443},
			Nodes: clusternix.Nodes{
				ControlPlane: []clusternix.Node{
					{Name: "cp-3", Addresses: []string{"10.0.0.3"}},
					{Name: "cp-1", Addresses: []string{"10.0.0.1", "fd00::1"}},
					{Name: "cp-2", Addresses: []string{"10.0.0.2"}},
				},
				DataPlane: []clusternix.Node{
					{Name: "worker-2", Addresses: []string{"worker-2.fleet.example"}},
					{Name: "worker-1", Addresses: []string{"10.0.1.1"}},
				},
			},
			Etcd: clusternix.Etcd{
				Provider:  clusternix.EtcdNico,
				Endpoints: []string{"https://10.0.0.2:2379", "https://10.0.0.1:2379", "https://10.0.0.3:2379"},
				Prefix:    "/clusters/prod/registry",
			},
			Components: clusternix.Components{
				APIServer: clusternix.Component{ExtraArgs: map[string]string{"v": "2", "audit-log-path": "/var/log/kube/audit.log", "feature-gates": "A=true,B=false"},
					Limits: map[string]string{"MemoryMax": "2147483648", "CPUQuota": "150%"}},
				ControllerManager: clusternix.Component{Version: "1.37.2", Limits: map[string]string{"MemoryMax": "536870912"}},
				Scheduler:         clusternix.Component{Provider: clusternix.External, ExternalURL: "https://10.0.0.50:10259/healthz"},
				Kubelet:           clusternix.Component{Provider: clusternix.Native, Version: "v1.37.2", ExtraArgs: map[string]string{"max-pods": "50"}},
			},
			Paths: clusternix.DefaultPaths(),
		}
	},
	// k3s on nico's etcd through the namespacing proxy (spec.etcd.namespace).
	"nico-namespaced": func() clusternix.Cluster {
		return clusternix.Cluster{
			Name:                 "k3s",
			Version:              "1.37.2",
			ControlPlaneEndpoint: clusternix.Endpoint{Host: "10.0.0.10", Port: 6443},
			Nodes: clusternix.Nodes{
				ControlPlane: []clusternix.Node{{Name: "cp-1", Addresses: []string{"10.0.0.1"}}, {Name: "cp-2", Addresses: []string{"10.0.0.2"}}},
				DataPlane:    []clusternix.Node{{Name: "worker-1", Addresses: []string{"10.0.1.1"}}},
			},
			Etcd: clusternix.Etcd{
				Provider:  clusternix.EtcdNico,
				Endpoints: []string{"https://10.0.0.1:2379", "https://10.0.0.2:2379"},
				Proxy:     &clusternix.EtcdProxy{Namespace: "/clusters/k3s/", Listen: clusternix.DefaultProxyListen, ClientCommonName: "kubernetes:k3s"},
			},
			Paths: clusternix.DefaultPaths(),
		}
	},
	// k3s with its embedded etcd: the first server initialises.
	"distribution": func() clusternix.Cluster {
		return clusternix.Cluster{
			Name:                 "edge",
			Version:              "1.36",
			ControlPlaneEndpoint: clusternix.Endpoint{Host: "api.edge.example", Port: 6443},
			FirstServer:          "s1",
			Nodes: clusternix.Nodes{
				ControlPlane: []clusternix.Node{{Name: "s1", Addresses: []string{"192.168.1.1"}}, {Name: "s2", Addresses: []string{"192.168.1.2"}}, {Name: "s3", Addresses: []string{"192.168.1.3"}}},
				DataPlane:    []clusternix.Node{{Name: "a1", Addresses: []string{"192.168.1.11"}}},
			},
			Etcd:  clusternix.Etcd{Provider: clusternix.EtcdDistribution},
			Paths: clusternix.DefaultPaths(),
		}
	},
	// One control-plane machine on an IPv6 endpoint, external etcd with
	// no prefix, no data plane, paths of the caller's choosing.
	"external-single": func() clusternix.Cluster {
		p := clusternix.DefaultPaths()
		p.JoinToken = "/run/keys/k8s/join-token"
		p.Kubeconfig = "/etc/rancher/k3s/k3s.yaml"
		return clusternix.Cluster{
			Name:                 "lab",
			Version:              "1.37.0",
			ControlPlaneEndpoint: clusternix.Endpoint{Host: "fd00::10", Port: 443},
			Nodes:                clusternix.Nodes{ControlPlane: []clusternix.Node{{Name: "solo", Addresses: []string{"fd00::10"}}}},
			Etcd:                 clusternix.Etcd{Provider: clusternix.EtcdExternal, Endpoints: []string{"https://[fd00::20]:2379", "http://etcd.lab.example:2379"}},
			Paths:                p,
		}
	},
}
