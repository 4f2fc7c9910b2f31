package kubetest

import (
	"context"
	"fmt"
)

// apiServer is the API server's current process.
func (cp *ControlPlane) apiServer() *Process {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.APIServer
}

// StopAPIServer stops the API server alone, as when a machine's
// kube-apiserver unit stops: the controller-manager and the scheduler
// keep running. StartAPIServer starts it again.
func (cp *ControlPlane) StopAPIServer() error {
	if err := cp.apiServer().Stop(); err != nil {
		return fmt.Errorf("kubetest: stop kube-apiserver: %w", err)
	}
	return nil
}

// StartAPIServer starts the API server again with the flags it first ran
// with (same address, files and etcd prefix), once the last one exited,
// and waits for its /readyz.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	if exited, _ := cp.apiServer().Exited(); !exited {
		return fmt.Errorf("kubetest: kube-apiserver at %s still runs; stop it first", cp.URL)
	}
	p, err := StartAPIServer(cp.apiConfig)
	if err != nil {
		return err
	}
	cp.mu.Lock()
	cp.APIServer = p
	cp.mu.Unlock()
	return WaitHealthy(ctx, p, cp.URL+"/readyz", cp.apiTLS, ReadyTimeout)
}
