package kubeapi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/homystack/nico/pkg/kubeapi"
)

// TestParseKubeconfig: the current context's cluster and user are taken,
// or the first context's when none is current, or the file's only
// cluster and user when the names find none; undecodable data and a
// context with no server are refused, naming what is wrong.
func TestParseKubeconfig(t *testing.T) {
	const two = `
clusters:
- {name: a, cluster: {server: "https://a:6443", certificate-authority-data: QUFB}}
- {name: b, cluster: {server: "https://b:6443", certificate-authority-data: QkJC}}
users:
- {name: ua, user: {token: ta}}
- {name: ub, user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}}
contexts:
- {name: ca, context: {cluster: a, user: ua}}
- {name: cb, context: {cluster: b, user: ub}}
`
	for _, tc := range []struct {
		name, file       string
		server, ca, cert string
		token, err       string
	}{
		{"current context", two + "current-context: cb\n", "https://b:6443", "BBB", "CERT", "", ""},
		{"first context when none is current", two, "https://a:6443", "AAA", "", "ta", ""},
		{"the only cluster and user", `
clusters: [{name: x, cluster: {server: "https://x:6443", certificate-authority-data: WFhY}}]
users: [{name: y, user: {token: t}}]
contexts: [{name: c, context: {cluster: other, user: other}}]
current-context: c
`, "https://x:6443", "XXX", "", "t", ""},
		{"no server", two + "current-context: nowhere\n", "", "", "", "", "no server in the current context (\"nowhere\")"},
		{"CA not base64", `
clusters: [{name: x, cluster: {server: "https://x:6443", certificate-authority-data: "!!"}}]
`, "", "", "", "", `cluster "x": certificate-authority-data is not base64`},
		{"client data not base64", `
clusters: [{name: x, cluster: {server: "https://x:6443", certificate-authority-data: WFhY}}]
users: [{name: y, user: {client-certificate-data: "!!"}}]
`, "", "", "", "", `user "y": client-certificate-data or client-key-data is not base64`},
		{"not YAML", "clusters: [", "", "", "", "", "does not parse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := kubeapi.ParseKubeconfig([]byte(tc.file))
			if tc.err != "" {
				if !errors.Is(err, kubeapi.ErrBadKubeconfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want ErrBadKubeconfig saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if k.Server != tc.server || string(k.CAPEM) != tc.ca || string(k.CertPEM) != tc.cert || k.Token != tc.token {
				t.Fatalf("got server %q ca %q cert %q token %q", k.Server, k.CAPEM, k.CertPEM, k.Token)
			}
		})
	}
}
