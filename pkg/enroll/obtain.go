package enroll

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
)

// GossipSecretFile is where a joined machine keeps the cluster's gossip
// secret (its mesh keys derive from it, not from the machine's token).
func GossipSecretFile(d pki.Dir) string { return filepath.Join(string(d), "gossip.secret") }

// Obtain makes this machine's key and certificate request, joins, and
// writes what it got into d, each file 0600 (Write): the node key pair,
// on a control-plane machine the bundle, the gossip secret, and last
// ca.crt, so that a machine interrupted half way joins again.
func Obtain(ctx context.Context, cfg ClientConfig, d pki.Dir) (*Response, error) {
	csrPEM, keyPEM, err := pki.NewCSR(pki.NodeIdentity(cfg.Name))
	if err != nil {
		return nil, fmt.Errorf("join: certificate request: %w", err)
	}
	resp, err := Join(ctx, cfg, csrPEM)
	if err != nil {
		return nil, err
	}
	if err := Write(d, resp, keyPEM, slices.Contains(cfg.Roles, api.RoleControlPlane)); err != nil {
		return nil, err
	}
	return resp, nil
}

// Write stores a join response and the node key in d: key pairs as pairs
// (pki.WritePair), other files alone (pki.WriteFile), ca.crt last.
func Write(d pki.Dir, resp *Response, nodeKeyPEM []byte, controlPlane bool) error {
	type file struct {
		path, keyPath string // keyPath "": a file alone
		data, keyData []byte
	}
	var files []file
	if b := resp.ControlPlane; controlPlane && b != nil {
		files = append(files,
			file{path: d.CAKey(), data: []byte(b.CAKeyPEM)},
			file{path: d.SecretsKey(), data: b.SecretsKey})
		if b.CoordinatorCertPEM != "" && b.CoordinatorKeyPEM != "" {
			files = append(files, file{d.Cert(pki.CoordinatorLeaf), d.Key(pki.CoordinatorLeaf), []byte(b.CoordinatorCertPEM), []byte(b.CoordinatorKeyPEM)})
		}
		if b.RootCertPEM != "" && b.RootKeyPEM != "" {
			files = append(files, file{d.Cert(pki.RootLeaf), d.Key(pki.RootLeaf), []byte(b.RootCertPEM), []byte(b.RootKeyPEM)})
		}
	}
	if len(resp.GossipSecret) > 0 {
		files = append(files, file{path: GossipSecretFile(d), data: resp.GossipSecret})
	}
	files = append(files,
		file{d.Cert(pki.NodeLeaf), d.Key(pki.NodeLeaf), []byte(resp.CertPEM), nodeKeyPEM},
		file{path: d.CACert(), data: []byte(resp.CAPEM)})
	for _, f := range files {
		if err := pki.WritePair(f.path, f.data, f.keyPath, f.keyData); err != nil {
			return fmt.Errorf("join: %w", err)
		}
	}
	return nil
}
