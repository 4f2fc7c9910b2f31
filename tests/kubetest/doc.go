// Package kubetest runs a real Kubernetes control plane for tests:
// kube-apiserver, kube-controller-manager and kube-scheduler built from the
// Go module proxy (tests/kubebin/build.sh, make kube-binaries) as child
// processes, on loopback, against a TLS etcd under a key prefix, with
// client-certificate authentication and RBAC. It also writes the files such
// a control plane needs (WritePKI, kubeadm's layout) and runs the built
// kubectl by path, never one from PATH.
//
// A control plane stops in reverse order, the API server before its etcd:
// an API server whose etcd went first hangs in its graceful shutdown.
//
//	StartControlPlane --> apiserver --/readyz ok--> controller-manager, scheduler --/healthz ok--> ready
//	Stop:                 scheduler, controller-manager, apiserver (SIGTERM, then SIGKILL after a grace)
package kubetest
