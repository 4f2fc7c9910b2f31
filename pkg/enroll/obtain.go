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
// writes what it got into d, each file 0600 (pki.WriteFile): the node key
// pair, on a control-plane machine the bundle, the gossip secret, and last
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

// Write stores a join response and the node key in d.
func Write(d pki.Dir, resp *Response, nodeKeyPEM []byte, controlPlane bool) error {
	type file struct {
		path string
		data []byte
	}
	var files []file
	if b := resp.ControlPlane; controlPlane && b != nil {
		files = append(files,
			file{d.CAKey(), []byte(b.CAKeyPEM)},
			file{d.SecretsKey(), b.SecretsKey})
		if b.CoordinatorCertPEM != "" && b.CoordinatorKeyPEM != "" {
			files = append(files,
				file{d.Key(pki.CoordinatorLeaf), []byte(b.CoordinatorKeyPEM)},
				file{d.Cert(pki.CoordinatorLeaf), []byte(b.CoordinatorCertPEM)})
		}
		if b.RootCertPEM != "" && b.RootKeyPEM != "" {
			files = append(files,
				file{d.Key(pki.RootLeaf), []byte(b.RootKeyPEM)},
				file{d.Cert(pki.RootLeaf), []byte(b.RootCertPEM)})
		}
	}
	if len(resp.GossipSecret) > 0 {
		files = append(files, file{GossipSecretFile(d), resp.GossipSecret})
	}
	files = append(files,
		file{d.Key(pki.NodeLeaf), nodeKeyPEM},
		file{d.Cert(pki.NodeLeaf), []byte(resp.CertPEM)},
		file{d.CACert(), []byte(resp.CAPEM)})
	for _, f := range files {
		if err := pki.WriteFile(f.path, f.data); err != nil {
			return fmt.Errorf("join: %w", err)
		}
	}
	return nil
}
