package coordinator

import (
	"net"
	"slices"
	"strconv"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/clusternix"
	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/kubeplan"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/rollout"
)

// DefaultAPIServerPort is the port of a control-plane endpoint that names
// none.
const DefaultAPIServerPort = 6443

// clusterEndpoint is the address clients reach kc's API servers at, as
// host:port: the spec's; else the one in use (status) while its host is
// still an address of a selected control-plane machine, so that it does
// not move under the clients; else the first selected control-plane
// machine's first address. "" while there is none.
func clusterEndpoint(kc *api.KubernetesCluster, sel kubeplan.Selection, f *clusterFleet) string {
	if e := kc.Spec.ControlPlaneEndpoint; e != "" {
		if _, _, err := net.SplitHostPort(e); err == nil {
			return e
		}
		return net.JoinHostPort(e, strconv.Itoa(DefaultAPIServerPort))
	}
	if cur := kc.Status.ControlPlaneEndpoint; cur != "" {
		if host, _, err := net.SplitHostPort(cur); err == nil {
			for _, m := range sel.ControlPlane {
				if slices.Contains(f.addresses(m), host) {
					return cur
				}
			}
		}
	}
	for _, m := range sel.ControlPlane {
		if as := f.addresses(m); len(as) > 0 {
			return net.JoinHostPort(as[0], strconv.Itoa(DefaultAPIServerPort))
		}
	}
	return ""
}

// renderClusterNix renders the cluster.nix every machine of kc gets: its
// nodes by role with their addresses, the endpoint, etcd's endpoints and
// prefix for provider nico (the voters' client URLs), and the paths of
// the delivered files (kubeadm's layout).
func renderClusterNix(kc *api.KubernetesCluster, sel kubeplan.Selection, f *clusterFleet, members []membership.Member, endpoint string) (string, error) {
	c := clusternix.Cluster{Name: kc.Metadata.Name, Version: kc.Spec.Version, Paths: clusternix.DefaultPaths()}
	if host, port, err := net.SplitHostPort(endpoint); err == nil {
		p, _ := strconv.Atoi(port)
		c.ControlPlaneEndpoint = clusternix.Endpoint{Host: host, Port: p}
	}
	for _, m := range sel.ControlPlane {
		c.Nodes.ControlPlane = append(c.Nodes.ControlPlane, clusternix.Node{Name: m, Addresses: f.addresses(m)})
	}
	for _, m := range sel.DataPlane {
		c.Nodes.DataPlane = append(c.Nodes.DataPlane, clusternix.Node{Name: m, Addresses: f.addresses(m)})
	}
	switch kc.Spec.Etcd.ProviderOrDefault() {
	case api.EtcdProviderNico:
		c.Etcd = clusternix.Etcd{Provider: clusternix.EtcdNico, Prefix: api.ClusterEtcdPrefix(kc.Metadata.Name)}
		if kc.Spec.Etcd.Namespace {
			// The distribution sets no prefix: each server runs the
			// namespacing proxy and the cluster's role reaches the namespace.
			c.Etcd.Prefix = ""
			c.Etcd.Proxy = &clusternix.EtcdProxy{Namespace: kubepki.EtcdNamespace(kc.Metadata.Name), Listen: clusternix.DefaultProxyListen, ClientCommonName: kubepki.EtcdUser(kc.Metadata.Name)}
		}
		for _, m := range members {
			if !m.Learner && len(m.ClientURLs) > 0 {
				c.Etcd.Endpoints = append(c.Etcd.Endpoints, m.ClientURLs[0])
			}
		}
		slices.Sort(c.Etcd.Endpoints)
		c.Etcd.Endpoints = slices.Compact(c.Etcd.Endpoints)
	case api.EtcdProviderExternal:
		c.Etcd = clusternix.Etcd{Provider: clusternix.EtcdExternal}
		if e := kc.Spec.Etcd.External; e != nil {
			c.Etcd.Endpoints = slices.Clone(e.Endpoints)
		}
	case api.EtcdProviderDistribution:
		// The first server is the one the control plane's rollout starts
		// with (name order, one at a time): it initialises the datastore
		// and the others join it one by one.
		c.Etcd = clusternix.Etcd{Provider: clusternix.EtcdDistribution}
		if len(sel.ControlPlane) > 0 {
			c.FirstServer = slices.MinFunc(sel.ControlPlane, rollout.Natural)
		}
	}
	c.Components = clusterComponents(kc.Spec)
	b, err := clusternix.Render(c)
	return string(b), err
}

// clusterComponents is cluster.nix's components from the spec: each
// one's provider, version (the cluster's when it names none), extra flags
// and its unit's systemd limits.
func clusterComponents(s api.KubernetesClusterSpec) clusternix.Components {
	one := func(p api.Part) clusternix.Component {
		spec := s.Component(p)
		c := clusternix.Component{Provider: clusternix.ComponentProvider(spec.ProviderOrDefault()), Version: spec.VersionOr(s.Version),
			ExtraArgs: spec.ExtraArgs, Limits: spec.Resources.SystemdLimits()}
		if spec.External != nil {
			c.ExternalURL = spec.External.URL
		}
		return c
	}
	return clusternix.Components{APIServer: one(api.PartAPIServer), ControllerManager: one(api.PartControllerManager),
		Scheduler: one(api.PartScheduler), Kubelet: one(api.PartKubelet)}
}
