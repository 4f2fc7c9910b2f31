package kube

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// nicoctlBuild is the nicoctl binary built once per test binary.
var nicoctlBuild struct {
	once sync.Once
	path string
	err  error
}

// nicoctlBin builds ./coordinator/cmd/nicoctl into a directory of the
// test that asks first; call it before the fleet starts so that the build
// falls outside its deadlines.
func nicoctlBin(t testing.TB) string {
	t.Helper()
	b := &nicoctlBuild
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "nico-kube-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "nicoctl")
		cmd := exec.Command("go", "build", "-o", b.path, "./coordinator/cmd/nicoctl")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./coordinator/cmd/nicoctl: %w\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// nicoctl returns a runner of the nicoctl binary at bin as an operator on
// a control-plane machine: root's certificate, the fleet's endpoints and
// the store's secrets key. It returns the combined output.
func (f *fleet) nicoctl(bin string) func(ctx context.Context, args ...string) (string, error) {
	files := etcdtest.IssueFiles(f.tb, filepath.Join(f.dir, "nicoctl"), pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient})
	return func(ctx context.Context, args ...string) (string, error) {
		// --timeout: nicoctl's 5 s default bounds the whole command (apply
		// observes every member first); five control planes starting under
		// -race on 2 cores can take longer to answer.
		all := append([]string{"--endpoints", strings.Join(f.endpoints(), ","), "--timeout", "30s",
			"--tls.caFile", files.CA, "--tls.certFile", files.Cert, "--tls.keyFile", files.Key,
			"--secrets.keyFile", f.nodes["cp-1"].cfg.PKI.Dir.SecretsKey()}, args...)
		cmd := exec.CommandContext(ctx, bin, all...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
}

// dialWith is a client of the fleet's etcd presenting tlsCfg's identity,
// closed when the test ends.
func (f *fleet) dialWith(t testing.TB, tlsCfg *tls.Config) *clientv3.Client {
	t.Helper()
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: f.endpoints(), DialTimeout: 5 * time.Second, TLS: tlsCfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}
