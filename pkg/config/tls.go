package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// DefaultPKIDir is where a machine keeps its certificates and keys
// (docs/security.md, "Files"): the agent's <dataDir>/pki with the default
// dataDir, and where the coordinator and nicoctl look for theirs.
const DefaultPKIDir = "/var/lib/nico/pki"

// PKI is where the agent keeps its certificates and keys, and the CA a user
// may give to the bootstrap machine instead of letting it make one.
type PKI struct {
	Dir        string // "pki.dir": <dataDir>/pki when unset
	CACertFile string // "pki.caCertFile": a user-given CA certificate (PEM), with CAKeyFile
	CAKeyFile  string // "pki.caKeyFile": the user-given CA's private key (PEM)
}

// TLS is the client certificate a program presents to etcd, and the CA it
// trusts the members' server certificates with.
type TLS struct {
	CAFile   string // "tls.caFile"
	CertFile string // "tls.certFile"
	KeyFile  string // "tls.keyFile"
}

// pkiKeys are the agent's PKI keys.
func pkiKeys(p *PKI) []key {
	return []key{
		stringKey("pki.dir", &p.Dir, "", "directory of this machine's certificates and keys (0700); empty means <dataDir>/pki", absPath(true)),
		stringKey("pki.caCertFile", &p.CACertFile, "", "a CA certificate (PEM) for the bootstrap machine to use instead of making one; with pki.caKeyFile", absPath(true)),
		stringKey("pki.caKeyFile", &p.CAKeyFile, "", "the private key (PEM) of pki.caCertFile", absPath(true)),
	}
}

// pkiRule: a user-given CA needs both its certificate and its key.
func pkiRule(p *PKI) rule {
	return rule{keys: []string{"pki.caCertFile", "pki.caKeyFile"}, check: func() error {
		switch {
		case p.CACertFile != "" && p.CAKeyFile == "":
			return fmt.Errorf("%q is not accepted without pki.caKeyFile; give the CA's key file too, or neither to let the bootstrap machine make a CA", p.CACertFile)
		case p.CACertFile == "" && p.CAKeyFile != "":
			return fmt.Errorf(`"" is not accepted with pki.caKeyFile %q; give the CA's certificate file too, or neither to let the bootstrap machine make a CA`, p.CAKeyFile)
		}
		return nil
	}}
}

// withPKIDefaults fills pki.dir from dataDir.
func (p *PKI) withDefaults(dataDir string) {
	if p.Dir == "" {
		p.Dir = filepath.Join(dataDir, "pki")
	}
}

// tlsKeys are the client TLS keys of the coordinator and nicoctl; identity
// names the certificate's file in DefaultPKIDir ("coordinator", "root").
func tlsKeys(t *TLS, identity string) []key { return tlsKeysChecked(t, identity, absPath(false)) }

// tlsKeysChecked are tlsKeys with path checking each file's path.
func tlsKeysChecked(t *TLS, identity string, path func(string) error) []key {
	return []key{
		stringKey("tls.caFile", &t.CAFile, filepath.Join(DefaultPKIDir, "ca.crt"), "the cluster CA certificate (PEM) that etcd's server certificates chain to", path),
		stringKey("tls.certFile", &t.CertFile, filepath.Join(DefaultPKIDir, identity+".crt"), "the client certificate (PEM) presented to etcd; its Common Name is the etcd user", path),
		stringKey("tls.keyFile", &t.KeyFile, filepath.Join(DefaultPKIDir, identity+".key"), "the private key (PEM) of tls.certFile", path),
	}
}

// errPlainHTTP is the reason an http:// etcd URL is refused.
var errPlainHTTP = errors.New("etcd runs with mutual TLS only")

// httpsURL accepts an https URL with a host and a port and nothing else,
// which is what etcd takes for peer and client URLs with TLS; example is
// shown in the error. An http URL is refused: etcd always runs with TLS.
func httpsURL(example string) func(string) error {
	return func(v string) error {
		reason := urlProblem(v)
		switch {
		case reason == "the scheme is not http or https":
			reason = "the scheme is not https"
		case reason == "" && strings.HasPrefix(v, "http://"):
			reason = "the scheme is http, and " + errPlainHTTP.Error()
		}
		if reason != "" {
			return fmt.Errorf("%q is not accepted: %s; use an https URL with a host and a port and no path, e.g. %s", v, reason, example)
		}
		return nil
	}
}

// anyPath accepts a non-empty path, absolute or relative to the working
// directory.
func anyPath(v string) error {
	if v == "" {
		return fmt.Errorf(`"" is not accepted; use a file's path (absolute, or relative to the working directory)`)
	}
	return nil
}

// absolute resolves the files' relative paths against the working directory.
func (t *TLS) absolute() error {
	for _, p := range []*string{&t.CAFile, &t.CertFile, &t.KeyFile} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return fmt.Errorf("resolve %q: %w", *p, err)
		}
		*p = abs
	}
	return nil
}
