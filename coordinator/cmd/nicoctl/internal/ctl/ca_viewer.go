package ctl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/homystack/nico/coordinator/statuspage"
	"github.com/homystack/nico/pkg/pki"
	"github.com/spf13/cobra"
)

// defaultViewerValidity is how long a viewer certificate is valid unless
// --validity says otherwise.
const defaultViewerValidity = 90 * 24 * time.Hour

// caViewerCmd is `nicoctl ca viewer`: a client certificate that reads the
// status page and nothing else (docs/statuspage.md, "Access").
func (a *app) caViewerCmd() *cobra.Command {
	var out, dir string
	var validity time.Duration
	c := &cobra.Command{
		Use:   "viewer --out <dir>",
		Short: "Issue a read-only status page certificate (CN nico-viewer) from this machine's CA: <dir>/nico-viewer.crt and .key",
		Long: `Issues a client certificate whose Common Name is nico-viewer, signed by the CA in
--pki-dir (a control-plane machine's, which holds ca.key). The status page serves
it; etcd has no user of that name, so it opens nothing else. Existing files are
never overwritten.`,
		Args: cobra.NoArgs,
		RunE: runE(func(_ *cobra.Command, _ []string) error {
			if out == "" {
				return withCode(ExitUsage, errors.New(`--out "" is not accepted; name a directory for nico-viewer.crt and nico-viewer.key, e.g. --out ./viewer`))
			}
			if validity <= 0 {
				return withCode(ExitUsage, fmt.Errorf("--validity %s is not accepted; use a positive duration such as %s", validity, defaultViewerValidity))
			}
			d, o := pki.Dir(dir), pki.Dir(out)
			certFile, keyFile := o.Cert(statuspage.ViewerIdentity), o.Key(statuspage.ViewerIdentity)
			for _, f := range []string{certFile, keyFile} {
				if _, err := os.Stat(f); err == nil {
					return withCode(ExitUsage, fmt.Errorf("%s exists; nicoctl ca viewer never overwrites: choose another --out", f))
				}
			}
			ca, err := pki.LoadCA(d.CACert(), d.CAKey())
			if err != nil {
				return withCode(ExitUsage, fmt.Errorf("the CA of --pki-dir %s: %w; run this on a control-plane machine, or pass the pki.dir holding ca.crt and ca.key", dir, err))
			}
			now := a.now()
			certPEM, keyPEM, err := ca.Issue(pki.Request{CommonName: statuspage.ViewerIdentity, Usage: pki.UsageClient, Validity: validity}, now)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Clean(out), 0o700); err != nil {
				return fmt.Errorf("--out %s: %w", out, err)
			}
			if err := pki.WriteFile(keyFile, keyPEM); err != nil {
				return err
			}
			if err := pki.WriteFile(certFile, certPEM); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "issued %q by %s, valid until %s\n  certificate %s\n  key         %s\n", statuspage.ViewerIdentity, fingerprint(ca.Cert),
				now.Add(validity).UTC().Format(time.RFC3339), certFile, keyFile)
			fmt.Fprintf(a.stdout, "read the page with: curl --cacert %s --cert %s --key %s https://HOST:9490/\n", d.CACert(), certFile, keyFile)
			return nil
		}),
	}
	c.Flags().StringVar(&out, "out", "", "directory to write nico-viewer.crt and nico-viewer.key (0600) into (made 0700 if missing)")
	c.Flags().DurationVar(&validity, "validity", defaultViewerValidity, "how long the certificate is valid")
	pkiDirFlag(c, &dir)
	return c
}
