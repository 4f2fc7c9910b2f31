package kubetest

import "path/filepath"

// Files are the paths a control plane reads, as kubeadm lays them out under
// one root (/etc/kubernetes on a host): pki/ca.crt, pki/sa.key,
// pki/front-proxy-ca.crt, pki/apiserver-etcd-client.crt, pki/etcd/ca.crt,
// admin.conf, ...
type Files struct {
	Root string

	CACert, CAKey               string // the cluster CA (clients and kubelets)
	APIServerCert, APIServerKey string // the API server's serving pair
	SAPublicKey, SAPrivateKey   string // service-account token keys

	FrontProxyCACert, FrontProxyCAKey         string
	FrontProxyClientCert, FrontProxyClientKey string
	// KubeletClientCert and KubeletClientKey are the API server's client
	// identity to kubelets (logs, exec).
	KubeletClientCert, KubeletClientKey string

	// EtcdCA, EtcdCert and EtcdKey are the API server's etcd client
	// identity and the CA of etcd's serving certificates.
	EtcdCA, EtcdCert, EtcdKey string

	AdminKubeconfig             string
	ControllerManagerKubeconfig string
	SchedulerKubeconfig         string
}

// Layout returns kubeadm's paths under root.
func Layout(root string) Files {
	p := func(name string) string { return filepath.Join(root, "pki", name) }
	return Files{
		Root:   root,
		CACert: p("ca.crt"), CAKey: p("ca.key"),
		APIServerCert: p("apiserver.crt"), APIServerKey: p("apiserver.key"),
		SAPublicKey: p("sa.pub"), SAPrivateKey: p("sa.key"),
		FrontProxyCACert: p("front-proxy-ca.crt"), FrontProxyCAKey: p("front-proxy-ca.key"),
		FrontProxyClientCert: p("front-proxy-client.crt"), FrontProxyClientKey: p("front-proxy-client.key"),
		KubeletClientCert: p("apiserver-kubelet-client.crt"), KubeletClientKey: p("apiserver-kubelet-client.key"),
		EtcdCA: p("etcd/ca.crt"), EtcdCert: p("apiserver-etcd-client.crt"), EtcdKey: p("apiserver-etcd-client.key"),
		AdminKubeconfig:             filepath.Join(root, "admin.conf"),
		ControllerManagerKubeconfig: filepath.Join(root, "controller-manager.conf"),
		SchedulerKubeconfig:         filepath.Join(root, "scheduler.conf"),
	}
}
