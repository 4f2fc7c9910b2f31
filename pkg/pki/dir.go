package pki

import "path/filepath"

// Dir is the layout of <dataDir>/pki (docs/security.md, "Files"): the
// directory is 0700 and every file in it 0600 (WriteFile makes them so).
type Dir string

// Well-known leaf names for Dir.Cert and Dir.Key.
const (
	NodeLeaf        = "node"
	EtcdServerLeaf  = "etcd-server"
	EtcdPeerLeaf    = "etcd-peer"
	CoordinatorLeaf = "coordinator"
	RootLeaf        = "root"
)

// CACert is the cluster CA certificate (or, during rotation, a bundle).
func (d Dir) CACert() string { return filepath.Join(string(d), "ca.crt") }

// CAKey is the cluster CA key; only control-plane machines hold it.
func (d Dir) CAKey() string { return filepath.Join(string(d), "ca.key") }

// SecretsKey is the store encryption key (pkg/secretbox).
func (d Dir) SecretsKey() string { return filepath.Join(string(d), "secrets.key") }

// Cert is the certificate of leaf name ("node", "etcd-server", ...).
func (d Dir) Cert(name string) string { return filepath.Join(string(d), name+".crt") }

// Key is the private key of leaf name.
func (d Dir) Key(name string) string { return filepath.Join(string(d), name+".key") }
