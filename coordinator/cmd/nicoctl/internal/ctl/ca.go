package ctl

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/pki"
	"github.com/spf13/cobra"
)

// caCmd is `nicoctl ca new|trust|activate|untrust|status`: the steps of a
// CA rotation (docs/security.md, "CA rotation"). They work on one
// machine's files, not through etcd: run them on each machine in turn.
//
//	ca new ──▶ ca trust (every machine) ──▶ restart one at a time
//	  ──▶ ca activate (control plane; agents re-issue their leaves) ──▶ ca renew-node (other machines)
//	  ──▶ ca untrust old (every machine) ──▶ restart one at a time
func (a *app) caCmd() *cobra.Command {
	return group("ca", "Rotate the cluster CA, one machine's pki.dir at a time; issue status page viewer certificates", "ca: new, trust, activate, renew-node, untrust, status or viewer",
		a.caNewCmd(), a.caTrustCmd(), a.caActivateCmd(), a.caRenewNodeCmd(), a.caUntrustCmd(), a.caStatusCmd(), a.caViewerCmd())
}

// pkiDirFlag adds --pki-dir to c.
func pkiDirFlag(c *cobra.Command, dir *string) {
	c.Flags().StringVar(dir, "pki-dir", config.DefaultPKIDir, "the machine's pki.dir (ca.crt, ca.key and its leaf certificates)")
}

func (a *app) caNewCmd() *cobra.Command {
	var out, cn string
	var validity time.Duration
	c := &cobra.Command{
		Use:   "new --out <dir>",
		Short: "Make a new CA: <dir>/ca.crt and <dir>/ca.key (0600); existing files are never overwritten",
		Args:  cobra.NoArgs,
		RunE: runE(func(_ *cobra.Command, _ []string) error {
			if out == "" {
				return withCode(ExitUsage, errors.New(`--out "" is not accepted; name a directory for the new ca.crt and ca.key, e.g. --out /root/ca-2027`))
			}
			if validity < 0 {
				return withCode(ExitUsage, fmt.Errorf("--validity %s is not accepted; use a positive duration such as 87600h, or 0 for %s", validity, pki.DefaultCAValidity))
			}
			d := pki.Dir(out)
			for _, f := range []string{d.CACert(), d.CAKey()} {
				if _, err := os.Stat(f); err == nil {
					return withCode(ExitUsage, fmt.Errorf("%s exists; nicoctl ca new never overwrites a CA: choose another --out", f))
				}
			}
			now := a.now()
			if cn == "" {
				cn = "nico cluster CA " + now.UTC().Format("2006-01-02")
			}
			ca, err := pki.NewCA(cn, validity, now)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			if err := ca.Save(d.CACert(), d.CAKey()); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "new CA %q %s, valid until %s\n", cn, fingerprint(ca.Cert), ca.Cert.NotAfter.UTC().Format(time.RFC3339))
			fmt.Fprintf(a.stdout, "  certificate %s\n  key         %s (keep it secret; it goes to control-plane machines only)\n", d.CACert(), d.CAKey())
			fmt.Fprintf(a.stdout, "next: nicoctl ca trust %s on every machine, then restart them one at a time\n", d.CACert())
			return nil
		}),
	}
	c.Flags().StringVar(&out, "out", "", "directory to write ca.crt and ca.key into (made 0700 if missing)")
	c.Flags().StringVar(&cn, "common-name", "", `the CA's Common Name; empty: "nico cluster CA <today>"`)
	c.Flags().DurationVar(&validity, "validity", pki.DefaultCAValidity, "how long the CA is valid")
	return c
}

func (a *app) caTrustCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "trust <new-ca.crt>",
		Short: "Add a CA to the machine's trust bundle (pki.dir/ca.crt); restart the machine to use it",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(_ *cobra.Command, args []string) error {
			d := pki.Dir(dir)
			add, _, err := readCAFile(args[0])
			if err != nil {
				return withCode(ExitUsage, err)
			}
			bundle, have, err := readBundle(d)
			if err != nil {
				return err
			}
			if containsCert(have, add) {
				fmt.Fprintf(a.stdout, "%s already trusts %q %s; nothing to do\n", d.CACert(), add.Subject.CommonName, fingerprint(add))
				return nil
			}
			next, err := pki.AppendCA(bundle, pemOf(add))
			if err != nil {
				return fmt.Errorf("%s: %w", d.CACert(), err)
			}
			if err := pki.WriteFile(d.CACert(), next); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s trusts %d CAs now, %q %s added\n", d.CACert(), len(have)+1, add.Subject.CommonName, fingerprint(add))
			fmt.Fprintln(a.stdout, "next: restart this machine's nico-agent, etcd and coordinator (nicoctl status healthy before the next machine)")
			return nil
		}),
	}
	pkiDirFlag(c, &dir)
	return c
}

func (a *app) caActivateCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "activate <new-ca.crt> <new-ca.key>",
		Short: "On a control-plane machine, make a trusted CA the one that signs (pki.dir/ca.key); the agent re-issues every leaf with it",
		Args:  cobra.ExactArgs(2),
		RunE: runE(func(_ *cobra.Command, args []string) error {
			d := pki.Dir(dir)
			certFile, keyFile := args[0], args[1]
			cert, certPEM, err := readCAFile(certFile)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			keyPEM, err := os.ReadFile(keyFile)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("CA key %s: %w", keyFile, err))
			}
			ca, err := pki.ParseCA(certPEM, keyPEM)
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("%s and %s are not a CA and its key: %w", certFile, keyFile, err))
			}
			if !ca.Cert.Equal(cert) {
				return withCode(ExitUsage, fmt.Errorf("%s does not belong to the first certificate of %s; give the new CA's certificate alone", keyFile, certFile))
			}
			if now := a.now(); now.After(cert.NotAfter) || now.Before(cert.NotBefore) {
				return withCode(ExitUsage, fmt.Errorf("%s is valid from %s until %s, not now", certFile, cert.NotBefore.UTC().Format(time.RFC3339), cert.NotAfter.UTC().Format(time.RFC3339)))
			}
			if _, err := os.Stat(d.CAKey()); err != nil {
				return withCode(ExitRefused, fmt.Errorf("%s: %w; only control-plane machines hold the CA key: activate it there (this machine needs nicoctl ca trust only)", d.CAKey(), err))
			}
			_, have, err := readBundle(d)
			if err != nil {
				return err
			}
			if !containsCert(have, cert) {
				return withCode(ExitRefused, fmt.Errorf("%s does not trust %q %s yet: run nicoctl ca trust %s on every machine and restart them one at a time first, or their peers would refuse the certificates it signs", d.CACert(), cert.Subject.CommonName, fingerprint(cert), certFile))
			}
			if old, err := pki.LoadCA(d.CACert(), d.CAKey()); err == nil && old.Cert.Equal(cert) {
				fmt.Fprintf(a.stdout, "%q %s already signs on this machine; nothing to do\n", cert.Subject.CommonName, fingerprint(cert))
				return nil
			}
			if err := pki.WriteFile(d.CAKey(), keyPEM); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%q %s signs on this machine now (%s); %s still trusts %d CAs\n", cert.Subject.CommonName, fingerprint(cert), d.CAKey(), d.CACert(), len(have))
			fmt.Fprintln(a.stdout, "next: the agent re-issues every leaf at its next renewal pass, without a restart (nicoctl ca status shows which CA signed each); machines without ca.key: nicoctl ca renew-node")
			return nil
		}),
	}
	pkiDirFlag(c, &dir)
	return c
}

func (a *app) caRenewNodeCmd() *cobra.Command {
	var dir string
	var endpoints []string
	c := &cobra.Command{
		Use:   "renew-node --join-endpoint <host:port>",
		Short: "On a machine without ca.key (worker, hypervisor), get a node certificate of the CA that signs now through a join endpoint (POST /v1/renew); the agent uses it from its next connection",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			d := pki.Dir(dir)
			if len(endpoints) == 0 {
				return withCode(ExitUsage, errors.New("--join-endpoint is required: the host:port of a control-plane machine's join endpoint (join.listen), e.g. 10.0.0.1:9443"))
			}
			if _, err := os.Stat(d.CAKey()); err == nil {
				return withCode(ExitRefused, fmt.Errorf("%s holds ca.key: its agent re-issues %s itself (nicoctl ca status shows which CA signed it)", string(d), d.Cert(pki.NodeLeaf)))
			}
			_, cas, err := readBundle(d)
			if err != nil {
				return err
			}
			c, err := enroll.Renew(cmd.Context(), enroll.RenewConfig{Endpoints: endpoints, Now: a.now}, d)
			if err != nil {
				return err
			}
			by := "a CA this machine does not trust"
			if ca := issuerOf(c, cas); ca != nil {
				by = fmt.Sprintf("%q %s", ca.Subject.CommonName, fingerprint(ca))
			}
			fmt.Fprintf(a.stdout, "%s renewed: %q serial %s, signed by %s, valid until %s\n", d.Cert(pki.NodeLeaf), c.Subject.CommonName, c.SerialNumber.Text(16), by, c.NotAfter.UTC().Format(time.RFC3339))
			return nil
		}),
	}
	pkiDirFlag(c, &dir)
	c.Flags().StringSliceVar(&endpoints, "join-endpoint", nil, "join endpoints (host:port) to renew through, tried in order")
	return c
}

func (a *app) caUntrustCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "untrust <old-ca.crt>",
		Short: "Remove a CA from the machine's trust bundle once no leaf here depends on it; restart the machine to apply",
		Args:  cobra.ExactArgs(1),
		RunE: runE(func(_ *cobra.Command, args []string) error {
			d := pki.Dir(dir)
			drop, _, err := readCAFile(args[0])
			if err != nil {
				return withCode(ExitUsage, err)
			}
			bundle, have, err := readBundle(d)
			if err != nil {
				return err
			}
			if !containsCert(have, drop) {
				fmt.Fprintf(a.stdout, "%s does not trust %q %s; nothing to do\n", d.CACert(), drop.Subject.CommonName, fingerprint(drop))
				return nil
			}
			if signer, err := pki.LoadCA(d.CACert(), d.CAKey()); err == nil && signer.Cert.Equal(drop) {
				return withCode(ExitRefused, fmt.Errorf("%q %s still signs on this machine (%s): nicoctl ca activate the new CA first", drop.Subject.CommonName, fingerprint(drop), d.CAKey()))
			}
			leaves, err := readLeaves(d, have)
			if err != nil {
				return err
			}
			var stale []string
			for _, l := range leaves {
				if l.cert != nil && l.issuer != nil && l.issuer.Equal(drop) {
					stale = append(stale, l.file)
				}
			}
			if len(stale) > 0 {
				return withCode(ExitRefused, fmt.Errorf("%s still signed by %q %s: wait for the agent to re-issue them (control plane) or run nicoctl ca renew-node (other machines) before untrusting it", strings.Join(stale, ", "), drop.Subject.CommonName, fingerprint(drop)))
			}
			next, err := pki.RemoveCA(bundle, pemOf(drop))
			if err != nil {
				return withCode(ExitRefused, fmt.Errorf("%s: %w", d.CACert(), err))
			}
			if err := pki.WriteFile(d.CACert(), next); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%s no longer trusts %q %s; %d CA(s) left\n", d.CACert(), drop.Subject.CommonName, fingerprint(drop), len(have)-1)
			fmt.Fprintln(a.stdout, "next: restart this machine's nico-agent, etcd and coordinator (nicoctl status healthy before the next machine)")
			return nil
		}),
	}
	pkiDirFlag(c, &dir)
	return c
}

// readCAFile reads the first certificate of a PEM file and checks that it
// is a CA's.
func readCAFile(path string) (*x509.Certificate, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("CA certificate: %w", err)
	}
	certs, err := pki.ParseCerts(data)
	if err != nil || len(certs) == 0 {
		return nil, nil, fmt.Errorf("CA certificate %s: no PEM certificate in it (%v)", path, err)
	}
	if len(certs) > 1 {
		return nil, nil, fmt.Errorf("CA certificate %s holds %d certificates; give one CA's certificate alone", path, len(certs))
	}
	if !certs[0].IsCA {
		return nil, nil, fmt.Errorf("CA certificate %s: %q is not a CA certificate (a leaf?)", path, certs[0].Subject.CommonName)
	}
	return certs[0], data, nil
}

// readBundle reads pki.dir's ca.crt.
func readBundle(d pki.Dir) ([]byte, []*x509.Certificate, error) {
	data, err := os.ReadFile(d.CACert())
	if err != nil {
		return nil, nil, fmt.Errorf("trust bundle: %w; is --pki-dir %s this machine's pki.dir?", err, string(d))
	}
	certs, err := pki.ParseCerts(data)
	if err != nil {
		return nil, nil, fmt.Errorf("trust bundle %s: %w", d.CACert(), err)
	}
	return data, certs, nil
}

// leafFile is one leaf certificate of a pki.dir and the bundle CA that
// signed it (nil: none of them).
type leafFile struct {
	name   string
	file   string
	cert   *x509.Certificate // nil: unreadable (err says why)
	err    error
	issuer *x509.Certificate
}

// readLeaves reads every <name>.crt of d but ca.crt, sorted by name.
func readLeaves(d pki.Dir, cas []*x509.Certificate) ([]leafFile, error) {
	files, err := filepath.Glob(filepath.Join(string(d), "*.crt"))
	if err != nil {
		return nil, err
	}
	var out []leafFile
	for _, f := range files {
		if f == d.CACert() {
			continue
		}
		l := leafFile{name: strings.TrimSuffix(filepath.Base(f), ".crt"), file: f}
		data, err := os.ReadFile(f)
		if err == nil {
			l.cert, err = pki.ParseCert(data)
		}
		if err != nil {
			l.err = err
			out = append(out, l)
			continue
		}
		l.issuer = issuerOf(l.cert, cas)
		out = append(out, l)
	}
	return out, nil
}

// issuerOf is the CA of cas that signed c, or nil.
func issuerOf(c *x509.Certificate, cas []*x509.Certificate) *x509.Certificate {
	for _, ca := range cas {
		if bytes.Equal(c.RawIssuer, ca.RawSubject) && c.CheckSignatureFrom(ca) == nil {
			return ca
		}
	}
	return nil
}

func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, h := range certs {
		if h.Equal(c) {
			return true
		}
	}
	return false
}

// pemOf is c's PEM.
func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
