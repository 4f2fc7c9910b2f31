package kubetest

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultServiceCIDR is the service range when a config names none.
const DefaultServiceCIDR = "10.96.0.0/12"

// APIServerConfig is one kube-apiserver.
type APIServerConfig struct {
	Binary string
	Files  Files
	// EtcdServers are etcd's client URLs; EtcdPrefix the key prefix the API
	// server stores under (--etcd-prefix), within its etcd identity's reach.
	EtcdServers []string
	EtcdPrefix  string
	// Host is the address it binds and advertises (127.0.0.1 when empty);
	// Port its secure port.
	Host string
	Port int
	// Dir holds its log and cert dir.
	Dir       string
	ExtraArgs []string
}

func (c APIServerConfig) host() string {
	if c.Host == "" {
		return "127.0.0.1"
	}
	return c.Host
}

// URL is the API server's address.
func (c APIServerConfig) URL() string {
	return "https://" + net.JoinHostPort(c.host(), strconv.Itoa(c.Port))
}

// Args are kube-apiserver's flags. Authentication is real (client
// certificates of the cluster CA, service-account tokens, bootstrap tokens,
// front-proxy request headers) and so is authorisation (Node, RBAC).
//
// On a restricted etcd identity (one prefix and nothing else) the
// periodic compaction would reach outside the prefix (etcd allows Compact
// to root only; nico's etcd is compacted by nico): it is turned off, and
// with it the API server reads nothing outside its prefix (no compactor,
// so no watch of the top-level compact_rev_key either).
func (c APIServerConfig) Args() []string {
	f := c.Files
	args := []string{
		"--bind-address=" + c.host(),
		"--advertise-address=" + c.host(),
		"--secure-port=" + strconv.Itoa(c.Port),
		"--cert-dir=" + filepath.Join(c.Dir, "certs"),
		"--tls-cert-file=" + f.APIServerCert,
		"--tls-private-key-file=" + f.APIServerKey,
		"--client-ca-file=" + f.CACert,
		"--authorization-mode=Node,RBAC",
		"--enable-bootstrap-token-auth=true",
		// Kubelets are reached at their node address (logs, exec), not
		// their host name, which resolves nowhere here.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + f.SAPublicKey,
		"--service-account-signing-key-file=" + f.SAPrivateKey,
		"--service-cluster-ip-range=" + DefaultServiceCIDR,
		"--requestheader-client-ca-file=" + f.FrontProxyCACert,
		"--requestheader-allowed-names=" + FrontProxyClientUser,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + f.FrontProxyClientCert,
		"--proxy-client-key-file=" + f.FrontProxyClientKey,
		"--etcd-servers=" + strings.Join(c.EtcdServers, ","),
		"--etcd-cafile=" + f.EtcdCA,
		"--etcd-certfile=" + f.EtcdCert,
		"--etcd-keyfile=" + f.EtcdKey,
		"--etcd-prefix=" + c.EtcdPrefix,
		"--etcd-compaction-interval=0",
		// Several API servers of a test share 127.0.0.1, which the
		// kubernetes service's endpoints may not hold.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		// Drain non-long-running requests, then give watches 2 s (GOAWAY)
		// instead of the request timeout (60 s) that http.Server.Shutdown
		// waits for them otherwise: the controller-managers and schedulers
		// of the other machines watch through the endpoint.
		"--shutdown-send-retry-after=true",
	}
	if f.KubeletClientCert != "" {
		args = append(args, "--kubelet-client-certificate="+f.KubeletClientCert, "--kubelet-client-key="+f.KubeletClientKey)
	}
	return append(args, c.ExtraArgs...)
}

// StartAPIServer starts kube-apiserver (it does not wait for it; see
// ControlPlane).
func StartAPIServer(c APIServerConfig) (*Process, error) {
	if c.Port == 0 || c.EtcdPrefix == "" || len(c.EtcdServers) == 0 {
		return nil, fmt.Errorf("kubetest: api server: port %d, etcd prefix %q, etcd servers %v: want all set", c.Port, c.EtcdPrefix, c.EtcdServers)
	}
	return StartProcess("kube-apiserver", filepath.Join(c.Dir, "kube-apiserver.log"), c.Binary, c.Args()...)
}
