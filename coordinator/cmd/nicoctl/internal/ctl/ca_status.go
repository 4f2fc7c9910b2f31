package ctl

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/homystack/nico/pkg/pki"
	"github.com/spf13/cobra"
)

// caStatusOut is `nicoctl ca status` as JSON or YAML.
type caStatusOut struct {
	Dir    string    `json:"dir"`
	CAs    []caOut   `json:"cas"`
	Leaves []leafOut `json:"leaves"`
	Phase  string    `json:"phase"`
	Notes  []string  `json:"notes,omitempty"`
}

type caOut struct {
	CommonName  string    `json:"commonName"`
	Fingerprint string    `json:"fingerprint"` // SHA-256 of the DER
	NotAfter    time.Time `json:"notAfter"`
	Signs       bool      `json:"signs"` // ca.key is this CA's key
}

type leafOut struct {
	Name       string    `json:"name"`
	CommonName string    `json:"commonName,omitempty"`
	Issuer     string    `json:"issuer,omitempty"` // the signing CA's fingerprint; empty: no CA of the bundle
	NotAfter   time.Time `json:"notAfter,omitzero"`
	Error      string    `json:"error,omitempty"`
	ByOtherCA  bool      `json:"byOtherCA,omitempty"` // signed by a trusted CA that does not sign here
	Untrusted  bool      `json:"untrusted,omitempty"` // signed by no CA of the bundle
}

func (a *app) caStatusCmd() *cobra.Command {
	var dir string
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the CAs this machine trusts, which one signs (ca.key), and which CA signed each leaf in pki.dir, with expiry dates",
		Args:  cobra.NoArgs,
		RunE: runE(func(_ *cobra.Command, _ []string) error {
			st, err := caStatus(pki.Dir(dir))
			if err != nil {
				return err
			}
			return a.emit(st, func(w io.Writer) { printCAStatus(w, st) })
		}),
	}
	pkiDirFlag(c, &dir)
	return c
}

// caStatus reads d: its bundle, the CA its ca.key belongs to, its leaves.
func caStatus(d pki.Dir) (caStatusOut, error) {
	_, cas, err := readBundle(d)
	if err != nil {
		return caStatusOut{}, err
	}
	st := caStatusOut{Dir: string(d)}
	var signer *x509.Certificate
	var keyErr error
	if ca, err := pki.LoadCA(d.CACert(), d.CAKey()); err == nil {
		signer = ca.Cert
	} else if _, statErr := os.Stat(d.CAKey()); statErr == nil {
		keyErr = err // a ca.key of no CA this machine trusts
	}
	for _, c := range cas {
		st.CAs = append(st.CAs, caOut{CommonName: c.Subject.CommonName, Fingerprint: fingerprint(c), NotAfter: c.NotAfter.UTC(), Signs: signer != nil && signer.Equal(c)})
	}
	leaves, err := readLeaves(d, cas)
	if err != nil {
		return caStatusOut{}, err
	}
	var other, untrusted int
	for _, l := range leaves {
		o := leafOut{Name: l.name}
		switch {
		case l.err != nil:
			o.Error = l.err.Error()
			untrusted++
		case l.issuer == nil:
			o.CommonName, o.NotAfter, o.Untrusted = l.cert.Subject.CommonName, l.cert.NotAfter.UTC(), true
			untrusted++
		default:
			o.CommonName, o.NotAfter, o.Issuer = l.cert.Subject.CommonName, l.cert.NotAfter.UTC(), fingerprint(l.issuer)
			// Without ca.key (a worker), the newest trusted CA is the
			// one that should sign.
			want := signer
			if want == nil {
				want = cas[len(cas)-1]
			}
			if !l.issuer.Equal(want) {
				o.ByOtherCA = true
				other++
			}
		}
		st.Leaves = append(st.Leaves, o)
	}
	switch {
	case keyErr != nil:
		st.Phase = "broken"
		st.Notes = append(st.Notes, fmt.Sprintf("%s: %v: the agent can issue no certificate; nicoctl ca trust the CA of this key, or activate a trusted CA", d.CAKey(), keyErr))
	case untrusted > 0:
		st.Phase = "broken"
		st.Notes = append(st.Notes, fmt.Sprintf("%d leaf(s) unreadable or signed by no trusted CA: this machine's TLS fails with them", untrusted))
	case len(cas) > 1 && other > 0:
		st.Phase = "rotating"
		st.Notes = append(st.Notes, fmt.Sprintf("%d leaf(s) signed by another CA than the signing one: wait for the agent's renewal (control plane) or run nicoctl ca renew-node (other machines)", other))
	case len(cas) > 1:
		st.Phase = "rotated"
		st.Notes = append(st.Notes, "every leaf is signed by the signing CA: the others can be untrusted once every machine is here")
	default:
		st.Phase = "steady"
	}
	return st, nil
}

func printCAStatus(w io.Writer, st caStatusOut) {
	row(w, "CA", "FINGERPRINT", "NOT AFTER", "SIGNS")
	for _, c := range st.CAs {
		signs := ""
		if c.Signs {
			signs = "yes"
		}
		row(w, c.CommonName, short(c.Fingerprint), c.NotAfter.Format(time.RFC3339), signs)
	}
	fmt.Fprintln(w)
	row(w, "LEAF", "COMMON NAME", "SIGNED BY", "NOT AFTER")
	for _, l := range st.Leaves {
		by := short(l.Issuer)
		switch {
		case l.Error != "":
			row(w, l.Name, "unreadable: "+l.Error, "", "")
			continue
		case l.Untrusted:
			by = "UNTRUSTED CA"
		case l.ByOtherCA:
			by += " (not the signing CA)"
		}
		row(w, l.Name, l.CommonName, by, l.NotAfter.Format(time.RFC3339))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s\t%s\n", "phase:", st.Phase)
	for _, n := range st.Notes {
		fmt.Fprintf(w, "%s\t%s\n", "note:", n)
	}
}

// fingerprint is the SHA-256 of a certificate's DER, in hex.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// short is a fingerprint's first 16 hex digits, for tables.
func short(fp string) string {
	const n = len("sha256:") + 16
	if len(fp) > n {
		return fp[:n]
	}
	return fp
}
