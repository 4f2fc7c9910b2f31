package kubetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/pki"
)

// ReleaseAttr is the flake attribute of a released machine's generation
// (onRemoveFlake "#minimal"): nothing of the cluster runs.
const ReleaseAttr = "minimal"

// ClusterNixPath is the additional file a Kubernetes cluster's generation
// reads, relative to the flake.
const ClusterNixPath = "cluster.nix"

// Machine is one host of the sandbox whose exec applier runs a Kubernetes
// generation, as a flake importing cluster.nix would:
//
//	no cluster.nix, or #minimal  --> nothing runs (a control plane that ran is stopped)
//	listed in controlPlane       --> issue the serving and kubeconfig pairs from the
//	                                 delivered CAs, start kube-apiserver on the
//	                                 delivered etcd identity under the cluster's
//	                                 prefix with components.apiServer's extraArgs,
//	                                 then controller-manager and scheduler
//	                                 (restarted when they exit); return once the
//	                                 API server is ready
//	listed in dataPlane          --> record cluster.nix and the tokens; with Worker,
//	                                 start containerd and a kubelet that joins with
//	                                 the delivered bootstrap kubeconfig alone (the
//	                                 kubelet alone stopped in a generation of
//	                                 SetKubeletOffIn's repository)
//
// Its files live under Root (Path): host files land at Root+path.
type Machine struct {
	Name     string
	Root     string
	Binaries Binaries
	// Host and Port are where its API server listens (127.0.0.1 and a free
	// port when unset): the machines of one test share loopback.
	Host string
	Port int
	Log  *slog.Logger
	// Worker, when set, is the real worker a data-plane generation runs,
	// and a control-plane one beside its control plane (Kubelet, NodeIP
	// and Dir; the rest comes from cluster.nix's paths).
	Worker *WorkerConfig

	mu     sync.Mutex
	cp     *ControlPlane
	cpKey  string
	worker *Worker
	// kubeletOffIn: SetKubeletOffIn.
	kubeletOffIn string
	applies      []Apply
}

// Apply is one run of the machine's generation.
type Apply struct {
	Generation int64
	Action     string // apply or rollback
	Attr       string // the flake attribute
	GitRepo    string // the generation's Git repository
	Role       string // controlPlane, dataPlane or ""
	Version    string // cluster.nix's version
	ClusterNix []byte
	JoinToken  []byte
	// BootstrapToken and BootstrapKubeconfig are the files at
	// cluster.nix's paths.bootstrapToken and paths.bootstrapKubeconfig.
	BootstrapToken, BootstrapKubeconfig []byte
	Restarted                           bool // a control plane was (re)started
	Started                             time.Time
	Finished                            time.Time
	Err                                 error
}

// Applier returns the machine's exec applier (gate: its health gate;
// secrets resolve secretRefs of host and additional files).
func (m *Machine) Applier(gate apply.Gate, secrets apply.Secrets) (apply.Applier, error) {
	var roots []string
	for _, r := range apply.DefaultHostFileRoots() {
		roots = append(roots, m.Path(r))
	}
	x, err := apply.NewExec(apply.ExecConfig{
		Command: []string{"sandbox-generation"}, Runner: m, Gate: gate,
		HostFiles: &apply.HostFiles{Roots: roots, Manifest: filepath.Join(m.Root, "var/lib/nico-agent/host-files.json"), Secrets: secrets},
	})
	if err != nil {
		return nil, err
	}
	return &rooted{m: m, inner: x, secrets: secrets}, nil
}

// Applies returns the runs so far.
func (m *Machine) Applies() []Apply {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.applies)
}

// ControlPlane returns the running control plane, nil when none runs.
func (m *Machine) ControlPlane() *ControlPlane {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cp
}

// Stop stops the control plane, if one runs (before the fleet's etcd).
func (m *Machine) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopLocked()
}

func (m *Machine) stopLocked() error {
	var errs []error
	if m.worker != nil {
		errs = append(errs, m.worker.Stop())
		m.worker = nil
	}
	if m.cp != nil {
		errs = append(errs, m.cp.Stop())
		m.cp, m.cpKey = nil, ""
	}
	return errors.Join(errs...)
}

// SetKubeletOffIn makes the machine's data-plane generations of Git
// repository repo leave the kubelet out, as a flake that does not enable
// it: the switch stops the kubelet alone and succeeds. A later generation
// of another repository starts it again. "" undoes it.
func (m *Machine) SetKubeletOffIn(repo string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kubeletOffIn = repo
}

// RunningWorker returns the running worker, nil when none runs.
func (m *Machine) RunningWorker() *Worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.worker
}

// runWorker starts the worker once, as a switch starts the kubelet's
// units: it returns once they started (the Node's readiness is the
// cluster's to judge).
func (m *Machine) runWorker(cf *ClusterFile) error {
	if m.worker != nil {
		return m.worker.StartKubelet() // after a generation without it
	}
	c := *m.Worker
	c.Name, c.BootstrapKubeconfig, c.CACert = m.Name, m.Path(cf.Paths["bootstrapKubeconfig"]), m.Path(cf.Paths["caCert"])
	if _, err := os.Stat(c.BootstrapKubeconfig); err != nil {
		return fmt.Errorf("kubetest: %s: no bootstrap kubeconfig: %w", m.Name, err)
	}
	if err := KeepCredentialsFor(c, c.CACert); err != nil {
		return err
	}
	w, err := StartWorker(c)
	if err != nil {
		return err
	}
	m.worker = w
	return nil
}

// Run implements apply.Runner: it is the generation.
func (m *Machine) Run(ctx context.Context, c apply.Cmd) ([]byte, error) {
	env := map[string]string{}
	for _, kv := range c.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	number, _ := strconv.ParseInt(env["NICO_GENERATION"], 10, 64)
	a := Apply{Generation: number, Action: env["NICO_ACTION"], Attr: env["NICO_FLAKE_ATTR"], GitRepo: env["NICO_GIT_REPO"], Started: time.Now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	a.Err = m.run(ctx, &a)
	a.Finished = time.Now()
	m.applies = append(m.applies, a)
	if m.Log != nil {
		m.Log.Info("sandbox generation", "machine", m.Name, "generation", a.Generation, "action", a.Action, "attr", a.Attr, "role", a.Role, "version", a.Version, "restarted", a.Restarted, "took", a.Finished.Sub(a.Started).Round(time.Millisecond), "err", a.Err)
	}
	return nil, a.Err
}

func (m *Machine) run(ctx context.Context, a *Apply) error {
	if a.Attr == "" || a.Attr == ReleaseAttr {
		return m.stopLocked()
	}
	nixPath := filepath.Join(m.flakeDir(a.Generation), ClusterNixPath)
	raw, err := os.ReadFile(nixPath)
	if errors.Is(err, os.ErrNotExist) {
		return m.stopLocked() // a generation of no cluster
	}
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	a.ClusterNix = raw
	cf, err := EvalClusterFile(ctx, nixPath)
	if err != nil {
		return err
	}
	a.Version, a.Role = cf.Version, cf.Role(m.Name)
	for key, dst := range map[string]*[]byte{"joinToken": &a.JoinToken, "bootstrapToken": &a.BootstrapToken, "bootstrapKubeconfig": &a.BootstrapKubeconfig} {
		if p := cf.Paths[key]; p != "" {
			if b, err := os.ReadFile(m.Path(p)); err == nil {
				*dst = b
			}
		}
	}
	switch a.Role {
	case "controlPlane":
		if err := m.runControlPlane(ctx, a, cf, raw); err != nil {
			return err
		}
		if m.Worker != nil {
			return m.runWorker(cf) // a control-plane machine that runs a kubelet too
		}
		return nil
	case "dataPlane":
		if m.Worker != nil && m.kubeletOffIn != "" && a.GitRepo == m.kubeletOffIn {
			if m.worker == nil {
				return nil
			}
			return m.worker.StopKubelet()
		}
		if m.Worker != nil {
			return m.runWorker(cf)
		}
		return m.stopLocked()
	default:
		return m.stopLocked()
	}
}

// Ports of kube-controller-manager's and kube-scheduler's secure serving
// (kubeadm's), used when a machine listens on its own address.
const (
	ControllerManagerPort = 10257
	SchedulerPort         = 10259
)

// runControlPlane (re)starts the control plane when cluster.nix or a file
// it reads changed, as a switch restarts units whose configuration did.
// It reads the files where nico delivers them (kubeadm's layout under
// /etc/kubernetes, cluster.nix's paths first) and issues, as kubeadm does,
// the leaves that were not delivered into Root/run/kubernetes. It listens
// on the machine's first address in cluster.nix at the endpoint's port
// (kubeadm's ports for the others) when that is a loopback address, else
// on Host and Port (127.0.0.1 and free ports when unset).
func (m *Machine) runControlPlane(ctx context.Context, a *Apply, cf *ClusterFile, raw []byte) error {
	f := Layout(m.Path("/etc/kubernetes"))
	for _, x := range []struct {
		dst  *string
		name string
	}{
		{&f.CACert, "caCert"}, {&f.CAKey, "caKey"}, {&f.SAPrivateKey, "serviceAccountKey"}, {&f.SAPublicKey, "serviceAccountPub"},
		{&f.FrontProxyCACert, "frontProxyCACert"}, {&f.FrontProxyCAKey, "frontProxyCAKey"},
		{&f.APIServerCert, "apiserverCert"}, {&f.APIServerKey, "apiserverKey"},
		{&f.EtcdCA, "etcdCACert"}, {&f.EtcdCert, "apiserverEtcdClientCert"}, {&f.EtcdKey, "apiserverEtcdClientKey"},
	} {
		if v := cf.Paths[x.name]; v != "" {
			*x.dst = m.Path(v)
		}
	}
	host, port, cmPort, schedPort := m.Host, m.Port, 0, 0
	if n, ok := cf.Node(m.Name); ok && host == "" && len(n.Addresses) > 0 && isLoopback(n.Addresses[0]) {
		host, port, cmPort, schedPort = n.Addresses[0], cf.ControlPlaneEndpoint.Port, ControllerManagerPort, SchedulerPort
	}
	if host == "" {
		host = "127.0.0.1"
	}
	key, err := digest(append(raw, host...), f.CACert, f.CAKey, f.SAPrivateKey, f.SAPublicKey, f.FrontProxyCACert, f.EtcdCA, f.EtcdCert, f.EtcdKey)
	if err != nil {
		return err
	}
	if m.cp != nil && m.cpKey == key {
		if exited, _ := m.cp.apiServer().Exited(); !exited {
			return nil
		}
	}
	if err := m.stopLocked(); err != nil {
		return err
	}
	if port == 0 {
		if port, err = FreePort(host); err != nil {
			return err
		}
	}
	ca, err := pki.LoadCA(f.CACert, f.CAKey)
	if err != nil {
		return fmt.Errorf("kubetest: cluster CA: %w", err)
	}
	proxy := func() (*pki.CA, error) {
		c, err := pki.LoadCA(f.FrontProxyCACert, f.FrontProxyCAKey)
		if err != nil {
			return nil, fmt.Errorf("kubetest: front-proxy CA: %w", err)
		}
		return c, nil
	}
	server := "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	if f, err = IssueMissing(f, Layout(filepath.Join(m.Root, "run/kubernetes")), ca, proxy, server, host, false); err != nil {
		return err
	}
	cp, err := StartControlPlane(ctx, ControlPlaneConfig{
		Binaries: m.Binaries, Files: f, EtcdServers: cf.Etcd.Endpoints, EtcdPrefix: cf.Etcd.Prefix, APIServerArgs: cf.Args("apiServer"),
		Host: host, Port: port, ControllerManagerPort: cmPort, SchedulerPort: schedPort, NoWaitComponents: true,
		Dir: filepath.Join(m.Root, "var/log/gen-"+strconv.FormatInt(a.Generation, 10)),
	})
	if err != nil {
		return err
	}
	m.cp, m.cpKey, a.Restarted = cp, key, true
	return nil
}

// isLoopback tells whether s is an IP address in 127.0.0.0/8 or ::1.
func isLoopback(s string) bool {
	ip := net.ParseIP(s)
	return ip != nil && ip.IsLoopback()
}

// digest hashes data and the contents of files.
func digest(data []byte, files ...string) (string, error) {
	h := sha256.New()
	h.Write(data)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("kubetest: %w", err)
		}
		h.Write([]byte{0})
		h.Write(bytes.TrimSpace(b))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
