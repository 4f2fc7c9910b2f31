package kubetest

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// The users the control plane's components act as (Kubernetes' built-in
// RBAC bindings know them).
const (
	AdminUser             = "kubernetes-admin"
	AdminGroup            = "system:masters"
	ControllerManagerUser = "system:kube-controller-manager"
	SchedulerUser         = "system:kube-scheduler"
	FrontProxyClientUser  = "front-proxy-client"
)

// WritePKI writes, under root in Layout's places, what kubeadm's certs and
// kubeconfig phases make for one control-plane machine: the cluster CA,
// the API server's serving pair (for host, localhost, the in-cluster
// names), the service-account keys, the front-proxy CA and client, and
// the admin, controller-manager and scheduler kubeconfigs for server. The
// etcd files are the caller's (they come from etcd's CA).
func WritePKI(root, server, host string) (Files, error) {
	f := Layout(root)
	ca, err := pki.NewCA("kubernetes", 0, time.Now())
	if err != nil {
		return Files{}, fmt.Errorf("kubetest: CA: %w", err)
	}
	if err := ca.Save(f.CACert, f.CAKey); err != nil {
		return Files{}, fmt.Errorf("kubetest: CA: %w", err)
	}
	proxy, err := pki.NewCA("front-proxy-ca", 0, time.Now())
	if err != nil {
		return Files{}, fmt.Errorf("kubetest: front-proxy CA: %w", err)
	}
	if err := proxy.Save(f.FrontProxyCACert, f.FrontProxyCAKey); err != nil {
		return Files{}, fmt.Errorf("kubetest: front-proxy CA: %w", err)
	}
	priv, pub, err := newKeyPair()
	if err != nil {
		return Files{}, err
	}
	if err := pki.WritePair(f.SAPublicKey, pub, f.SAPrivateKey, priv); err != nil {
		return Files{}, fmt.Errorf("kubetest: service-account keys: %w", err)
	}
	if err := WriteIssued(f, ca, proxy, server, host); err != nil {
		return Files{}, err
	}
	return f, nil
}

// WriteIssued writes the leaves a control-plane machine issues itself from
// the cluster and front-proxy CAs it was given (kubeadm does so on each
// control-plane node): the API server's serving pair, the front-proxy
// client and the three kubeconfigs for server.
func WriteIssued(f Files, ca, proxy *pki.CA, server, host string) error {
	_, err := IssueMissing(f, f, ca, func() (*pki.CA, error) { return proxy, nil }, server, host, false)
	return err
}

// IssueMissing issues, as kubeadm does on a control-plane node, each leaf
// of f that was not delivered (its file absent; all of them with force)
// into local's place for it, and returns f with those paths: the API
// server's serving pair, the front-proxy client (from the CA proxy
// returns), the admin, controller-manager and scheduler kubeconfigs for
// server.
func IssueMissing(f, local Files, ca *pki.CA, proxy func() (*pki.CA, error), server, host string, force bool) (Files, error) {
	missing := func(paths ...string) bool {
		if force {
			return true
		}
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return true
			}
		}
		return false
	}
	if missing(f.APIServerCert, f.APIServerKey) {
		f.APIServerCert, f.APIServerKey = local.APIServerCert, local.APIServerKey
		if err := writeLeaf(ca, Leaf{
			CommonName: "kube-apiserver", Server: true,
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			IPs:      sans(host),
		}, f.APIServerCert, f.APIServerKey); err != nil {
			return f, err
		}
	}
	if f.KubeletClientCert != "" && missing(f.KubeletClientCert, f.KubeletClientKey) {
		f.KubeletClientCert, f.KubeletClientKey = local.KubeletClientCert, local.KubeletClientKey
		if err := writeLeaf(ca, Leaf{CommonName: "kube-apiserver-kubelet-client", Organizations: []string{AdminGroup}, Client: true},
			f.KubeletClientCert, f.KubeletClientKey); err != nil {
			return f, err
		}
	}
	if missing(f.FrontProxyClientCert, f.FrontProxyClientKey) {
		pca, err := proxy()
		if err != nil {
			return f, err
		}
		f.FrontProxyClientCert, f.FrontProxyClientKey = local.FrontProxyClientCert, local.FrontProxyClientKey
		if err := writeLeaf(pca, Leaf{CommonName: FrontProxyClientUser, Client: true}, f.FrontProxyClientCert, f.FrontProxyClientKey); err != nil {
			return f, err
		}
	}
	for _, k := range []struct {
		path, local *string
		user        string
		orgs        []string
	}{
		{&f.AdminKubeconfig, &local.AdminKubeconfig, AdminUser, []string{AdminGroup}},
		{&f.ControllerManagerKubeconfig, &local.ControllerManagerKubeconfig, ControllerManagerUser, nil},
		{&f.SchedulerKubeconfig, &local.SchedulerKubeconfig, SchedulerUser, nil},
	} {
		if !missing(*k.path) {
			continue
		}
		*k.path = *k.local
		if err := WriteKubeconfig(*k.path, server, ca, k.user, k.orgs...); err != nil {
			return f, err
		}
	}
	return f, nil
}

// WriteEtcdClient writes the API server's etcd client files: etcd's CA
// certificate and a pair issued elsewhere.
func WriteEtcdClient(f Files, caPEM, certPEM, keyPEM []byte) error {
	if err := pki.WriteFile(f.EtcdCA, caPEM); err != nil {
		return fmt.Errorf("kubetest: etcd CA: %w", err)
	}
	if err := pki.WritePair(f.EtcdCert, certPEM, f.EtcdKey, keyPEM); err != nil {
		return fmt.Errorf("kubetest: etcd client: %w", err)
	}
	return nil
}

// sans is 127.0.0.1 and the host's address when it is another IP.
func sans(host string) []net.IP {
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP("10.96.0.1")}
	if ip := net.ParseIP(host); ip != nil && !ip.Equal(ips[0]) {
		ips = append(ips, ip)
	}
	return ips
}
