package kubetest

import (
	"encoding/base64"
	"fmt"

	"github.com/homystack/nico/pkg/pki"
)

// Kubeconfig renders a kubeconfig for one cluster and one user with the
// certificates embedded: server is the API server's URL, caPEM the CA its
// serving certificate chains to.
func Kubeconfig(server string, caPEM, certPEM, keyPEM []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: test
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: test
  context:
    cluster: test
    user: test
current-context: test
`, server, b64(caPEM), b64(certPEM), b64(keyPEM))
}

// WriteKubeconfig issues a client certificate for user (groups in orgs)
// from ca and writes a kubeconfig for server with it to path.
func WriteKubeconfig(path, server string, ca *pki.CA, user string, orgs ...string) error {
	c, k, err := IssueLeaf(ca, Leaf{CommonName: user, Organizations: orgs, Client: true})
	if err != nil {
		return err
	}
	if err := pki.WriteFile(path, Kubeconfig(server, ca.CertPEM, c, k)); err != nil {
		return fmt.Errorf("kubetest: kubeconfig %s: %w", path, err)
	}
	return nil
}
