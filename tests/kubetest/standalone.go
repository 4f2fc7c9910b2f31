package kubetest

import (
	"fmt"
	"os"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/clusternix"
)

// StandaloneSpec is a generation of cluster c without nico's cluster
// controller: cluster.nix rendered from c and every file it names under
// c.Paths delivered inline as a host file, its content read from src (a
// PKI the caller made: WritePKI and WriteEtcdClient). The same machines
// run it as they run a KubernetesCluster's generation, which makes it the
// baseline of what the controller adds.
func StandaloneSpec(c clusternix.Cluster, src Files, revision string) (api.NixosConfigurationSpec, error) {
	raw, err := clusternix.Render(c)
	if err != nil {
		return api.NixosConfigurationSpec{}, fmt.Errorf("kubetest: cluster.nix: %w", err)
	}
	spec := api.NixosConfigurationSpec{
		GitRepo: "https://git.example/standalone", Revision: revision,
		AdditionalFiles: []api.AdditionalFile{{Path: ClusterNixPath, Inline: string(raw)}},
	}
	p := c.Paths
	for _, x := range []struct{ dst, src string }{
		{p.CACert, src.CACert}, {p.CAKey, src.CAKey},
		{p.ServiceAccountKey, src.SAPrivateKey}, {p.ServiceAccountPub, src.SAPublicKey},
		{p.FrontProxyCACert, src.FrontProxyCACert}, {p.FrontProxyCAKey, src.FrontProxyCAKey},
		{p.EtcdCACert, src.EtcdCA}, {p.APIServerEtcdClientCert, src.EtcdCert}, {p.APIServerEtcdClientKey, src.EtcdKey},
	} {
		b, err := os.ReadFile(x.src)
		if err != nil {
			return api.NixosConfigurationSpec{}, fmt.Errorf("kubetest: %w", err)
		}
		spec.HostFiles = append(spec.HostFiles, api.HostFile{Path: x.dst, Inline: string(b)})
	}
	return spec, nil
}
