package coordinator

import (
	"testing"

	"github.com/homystack/nico/pkg/clusternix"
	"github.com/homystack/nico/pkg/kubepki"
)

// TestClusterNixNamesWhereKubePKIWrites: every path cluster.nix tells a
// flake is where the host files of package kubepki put that file, so a
// flake that follows cluster.nix reads what nico delivered.
func TestClusterNixNamesWhereKubePKIWrites(t *testing.T) {
	t.Parallel()
	nix, pki := clusternix.DefaultPaths(), kubepki.DefaultPaths()
	for _, c := range []struct{ name, nix, pki string }{
		{"joinToken", nix.JoinToken, pki.JoinToken},
		{"bootstrapKubeconfig", nix.BootstrapKubeconfig, pki.BootstrapKubeconfig},
		{"bootstrapToken", nix.BootstrapToken, pki.BootstrapToken},
		{"machineSSHKey", nix.MachineSSHKey, pki.SSHKey},
		{"caCert", nix.CACert, pki.CACert},
		{"caKey", nix.CAKey, pki.CAKey},
		{"apiserverCert", nix.APIServerCert, pki.APIServerCert},
		{"apiserverKey", nix.APIServerKey, pki.APIServerKey},
		{"etcdCACert", nix.EtcdCACert, pki.EtcdCACert},
		{"apiserverEtcdClientCert", nix.APIServerEtcdClientCert, pki.EtcdClientCert},
		{"apiserverEtcdClientKey", nix.APIServerEtcdClientKey, pki.EtcdClientKey},
		{"serviceAccountKey", nix.ServiceAccountKey, pki.SAKey},
		{"serviceAccountPub", nix.ServiceAccountPub, pki.SAPub},
		{"frontProxyCACert", nix.FrontProxyCACert, pki.FrontProxyCACert},
		{"frontProxyCAKey", nix.FrontProxyCAKey, pki.FrontProxyCAKey},
		{"kubeconfig", nix.Kubeconfig, pki.Kubeconfig},
	} {
		if c.nix == "" || c.nix != c.pki {
			t.Errorf("cluster.nix paths.%s = %q, kubepki writes it to %q", c.name, c.nix, c.pki)
		}
	}
}
