package kubetest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// ReadyTimeout bounds the wait for a component's health endpoint.
const ReadyTimeout = 90 * time.Second

// ControlPlaneConfig is one control-plane machine's components.
type ControlPlaneConfig struct {
	Binaries    Binaries
	Files       Files
	EtcdServers []string
	EtcdPrefix  string
	Host        string // 127.0.0.1 when empty
	Port        int    // the API server's secure port; a free one when 0
	// ControllerManagerPort and SchedulerPort are their secure ports
	// (free ones when 0).
	ControllerManagerPort, SchedulerPort int
	Dir                                  string // logs and cert dirs
	// APIServerArgs are added to kube-apiserver's flags.
	APIServerArgs []string
	// APIServerOnly starts no controller-manager or scheduler.
	APIServerOnly bool
	// NoWaitComponents returns once the API server is live (/livez), as a
	// switch returns once its units started: its readiness (/readyz), the
	// controller-manager and the scheduler are for the component probes
	// and a rollout's gate to see (the latter two come up under
	// supervision).
	NoWaitComponents bool
}

// ControlPlane is a running kube-apiserver with its controller-manager and
// scheduler.
type ControlPlane struct {
	APIServer *Process
	// ControllerManager and Scheduler are restarted when they exit (nil
	// with APIServerOnly).
	ControllerManager *Supervised
	Scheduler         *Supervised
	// URL is the API server's address; HealthzURLs the controller-manager's
	// and scheduler's /healthz.
	URL         string
	HealthzURLs map[string]string

	// apiConfig and apiTLS start the API server again (StartAPIServer);
	// mu guards APIServer once it can be replaced.
	apiConfig APIServerConfig
	apiTLS    *tls.Config
	mu        sync.Mutex
}

// StartControlPlane starts the API server, waits for its /readyz (its
// /livez with NoWaitComponents), then
// starts the controller-manager and scheduler and waits for their
// /healthz. On failure whatever started is stopped.
func StartControlPlane(ctx context.Context, c ControlPlaneConfig) (*ControlPlane, error) {
	host := c.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if c.Port == 0 {
		p, err := FreePort(host)
		if err != nil {
			return nil, err
		}
		c.Port = p
	}
	as := APIServerConfig{Binary: c.Binaries.APIServer, Files: c.Files, EtcdServers: c.EtcdServers, EtcdPrefix: c.EtcdPrefix, Host: host, Port: c.Port, Dir: filepath.Join(c.Dir, "apiserver"), ExtraArgs: c.APIServerArgs}
	cp := &ControlPlane{URL: as.URL(), HealthzURLs: map[string]string{}, apiConfig: as}
	ok := false
	defer func() {
		if !ok {
			_ = cp.Stop()
		}
	}()
	caPool, err := pki.LoadPool(c.Files.CACert)
	if err != nil {
		return nil, fmt.Errorf("kubetest: cluster CA: %w", err)
	}
	if cp.APIServer, err = StartAPIServer(as); err != nil {
		return nil, err
	}
	cp.apiTLS = &tls.Config{RootCAs: caPool, MinVersion: tls.VersionTLS12}
	wait := "/readyz"
	if c.NoWaitComponents {
		wait = "/livez"
	}
	if err := WaitHealthy(ctx, cp.APIServer, cp.URL+wait, cp.apiTLS, ReadyTimeout); err != nil {
		return nil, err
	}
	if !c.APIServerOnly {
		for _, comp := range []struct {
			name, bin, kubeconfig string
			dst                   **Supervised
			port                  int
			extra                 []string
		}{
			{"kube-controller-manager", c.Binaries.ControllerManager, c.Files.ControllerManagerKubeconfig, &cp.ControllerManager, c.ControllerManagerPort, []string{
				"--service-account-private-key-file=" + c.Files.SAPrivateKey,
				"--root-ca-file=" + c.Files.CACert,
				"--cluster-signing-cert-file=" + c.Files.CACert,
				"--cluster-signing-key-file=" + c.Files.CAKey,
				"--use-service-account-credentials=true",
				"--controllers=*,bootstrapsigner,tokencleaner",
			}},
			{"kube-scheduler", c.Binaries.Scheduler, c.Files.SchedulerKubeconfig, &cp.Scheduler, c.SchedulerPort, nil},
		} {
			port := comp.port
			if port == 0 {
				if port, err = FreePort(host); err != nil {
					return nil, err
				}
			}
			dir := filepath.Join(c.Dir, comp.name)
			args := append([]string{
				"--kubeconfig=" + comp.kubeconfig,
				"--authentication-kubeconfig=" + comp.kubeconfig,
				"--authorization-kubeconfig=" + comp.kubeconfig,
				"--client-ca-file=" + c.Files.CACert,
				"--bind-address=" + host,
				"--secure-port=" + strconv.Itoa(port),
				"--cert-dir=" + filepath.Join(dir, "certs"),
				"--leader-elect=true",
				"--profiling=false",
			}, comp.extra...)
			name, bin := comp.name, comp.bin
			p, err := Supervise(name, func() (*Process, error) {
				return StartProcess(name, filepath.Join(dir, name+".log"), bin, args...)
			})
			if err != nil {
				return nil, err
			}
			*comp.dst = p
			cp.HealthzURLs[comp.name] = "https://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/healthz"
		}
		// Their serving certificates are self-signed at start (--cert-dir):
		// the probe checks health, not their identity.
		insecure := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12} //nolint:gosec // self-signed, probe only
		for _, s := range []*Supervised{cp.ControllerManager, cp.Scheduler} {
			if c.NoWaitComponents {
				break
			}
			if err := WaitHealthy(ctx, s.Current(), cp.HealthzURLs[s.Name], insecure, ReadyTimeout); err != nil {
				return nil, err
			}
		}
	}
	ok = true
	return cp, nil
}

// Stop stops the scheduler, the controller-manager, then the API server
// (stop it before its etcd). It is idempotent.
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, s := range []*Supervised{cp.Scheduler, cp.ControllerManager} {
		if s != nil {
			errs = append(errs, s.Stop())
		}
	}
	if p := cp.apiServer(); p != nil {
		errs = append(errs, p.Stop())
	}
	return errors.Join(errs...)
}

// Memory reports each running component's resident memory, e.g.
// "kube-apiserver=310MiB kube-controller-manager=80MiB ...".
func (cp *ControlPlane) Memory() string {
	var parts []string
	procs := []*Process{cp.apiServer()}
	for _, s := range []*Supervised{cp.ControllerManager, cp.Scheduler} {
		if s != nil {
			procs = append(procs, s.Current())
		}
	}
	for _, p := range procs {
		if rss, err := p.RSS(); err == nil {
			parts = append(parts, fmt.Sprintf("%s=%dMiB", p.Name, rss>>20))
		}
	}
	return strings.Join(parts, " ")
}
