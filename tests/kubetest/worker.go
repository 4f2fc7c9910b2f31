package kubetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// WorkerConfig is one real Kubernetes worker: containerd (Debian's, with
// runc) and a kubelet that joins with a bootstrap kubeconfig alone.
type WorkerConfig struct {
	// Kubelet is the kubelet binary (Binaries.Kubelet).
	Kubelet string
	// Name is the Node's name (--hostname-override).
	Name string
	// NodeIP is its address (not loopback); the kubelet serves on it.
	NodeIP string
	// Port is the kubelet's port (10250 when 0).
	Port int
	// BootstrapKubeconfig is the file the kubelet joins with; CACert the
	// cluster CA it checks client certificates against.
	BootstrapKubeconfig, CACert string
	// PodCIDR is the CNI bridge's range (10.244.0.0/24 when empty) and
	// Bridge its name (cni0 when empty): workers that share a network
	// namespace each need their own.
	PodCIDR, Bridge string
	// Dir holds its state, sockets and logs.
	Dir string
	// Images are OCI archives (BuildImages) imported into containerd
	// before the kubelet starts; they hold the sandbox image PauseImage.
	Images []string
}

// KeepCredentialsFor keeps the kubelet's credentials in c.Dir (its
// kubeconfig and certificates) only while they are of the cluster whose
// CA is caCert, as the example flake's kubelet unit does before each
// start: the credentials of another cluster (a machine released and
// claimed by another, or a cluster made anew under the same name) are
// removed, so the kubelet joins this one with the bootstrap kubeconfig.
func KeepCredentialsFor(c WorkerConfig, caCert string) error {
	ca, err := os.ReadFile(caCert)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	kept := filepath.Join(c.Dir, "nico-ca.crt")
	if old, err := os.ReadFile(kept); err == nil && string(old) == string(ca) {
		return nil
	}
	for _, p := range []string{filepath.Join(c.Dir, "kubelet.conf"), filepath.Join(c.Dir, "pki")} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("kubetest: %w", err)
		}
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if err := os.WriteFile(kept, ca, 0o644); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	return nil
}

// Worker is a running containerd and kubelet.
type Worker struct {
	Containerd, Kubelet *Process
	// Kubeconfig is what the kubelet writes once its CSR is signed.
	Kubeconfig string
	held       bool   // holds a reference on hostSettings
	mountNS    string // containerd's mount namespace (mnt:[inode])
	// kubelet is how the kubelet starts (StartKubelet).
	kubelet struct {
		name, log string
		args      []string
	}
}

// kubeletSysctls are the kernel settings the kubelet changes at start;
// they are put back when the host's last worker stops.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

// hostSettings guards kubeletSysctls across the workers of this process
// and, through a lock file, of other test processes: the first worker
// takes the lock and reads the settings, the last one puts them back and
// releases it. (A second process's workers wait for the lock: a kubelet
// started by one would otherwise read the values another's changed.)
var hostSettings struct {
	sync.Mutex
	refs  int
	lock  *os.File
	saved map[string]string
}

// hostLockPath is the lock file of hostSettings.
const hostLockPath = "/run/lock/nico-kubetest-kubelet.lock"

func acquireHost() error {
	hostSettings.Lock()
	defer hostSettings.Unlock()
	if hostSettings.refs > 0 {
		hostSettings.refs++
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(hostLockPath), 0o755); err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	f, err := os.OpenFile(hostLockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return fmt.Errorf("kubetest: lock %s: %w", hostLockPath, err)
	}
	saved := map[string]string{}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			f.Close()
			return fmt.Errorf("kubetest: read %s: %w", k, err)
		}
		saved[k] = strings.TrimSpace(string(b))
	}
	hostSettings.refs, hostSettings.lock, hostSettings.saved = 1, f, saved
	return nil
}

func releaseHost() error {
	hostSettings.Lock()
	defer hostSettings.Unlock()
	if hostSettings.refs--; hostSettings.refs > 0 {
		return nil
	}
	var errs []error
	for k, v := range hostSettings.saved {
		if b, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(b)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("kubetest: restore %s=%s: %w", k, v, err))
			}
		}
	}
	errs = append(errs, hostSettings.lock.Close()) // closing releases the lock
	hostSettings.lock, hostSettings.saved = nil, nil
	return errors.Join(errs...)
}

// Pitfalls of this host that shape the worker: the cgroup hierarchy is v1
// (failCgroupV1: false; no QoS cgroups, so the kubelet leaves no cgroup
// behind); CAP_SYS_RESOURCE is missing (containerd's
// restrict_oom_score_adj); the device-plugin socket path is fixed, so the
// kubelet runs in a private mount namespace with its own /var/lib/kubelet.

// StartWorker starts containerd, then the kubelet; on failure whatever
// started is stopped.
func StartWorker(c WorkerConfig) (*Worker, error) {
	if c.Port == 0 {
		c.Port = 10250
	}
	if c.PodCIDR == "" {
		c.PodCIDR = "10.244.0.0/24"
	}
	if c.Bridge == "" {
		c.Bridge = "cni0"
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return nil, fmt.Errorf("kubetest: worker dir: %w", err)
	}
	w := &Worker{Kubeconfig: filepath.Join(dir, "kubelet.conf")}
	if err := acquireHost(); err != nil {
		return nil, err
	}
	w.held = true
	ok := false
	defer func() {
		if !ok {
			_ = w.Stop()
		}
	}()
	sock := filepath.Join(dir, "containerd.sock")
	// The kubelet's eviction thresholds are a share of the disk under its
	// directory, the host's: a worker's pods must not be refused because
	// the machine running the tests has less than 15 % of its disk free,
	// and its images, imported by hand, must not be collected.
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %q
`, filepath.Join(dir, "containerd/root"), filepath.Join(dir, "containerd/state"), sock, filepath.Join(dir, "containerd/opt"), PauseImage, filepath.Join(dir, "net.d")),
		"net.d/10-bridge.conflist": fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "nico-test", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}},
  {"type": "loopback"}]}
`, c.Bridge, c.PodCIDR, filepath.Join(dir, "cni-ipam")),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
rotateCertificates: true
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %q}
authorization: {mode: Webhook}
resolvConf: ""
registerNode: true
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
`, sock, c.NodeIP, c.Port, c.CACert),
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("kubetest: %w", err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("kubetest: %w", err)
		}
	}
	own := filepath.Join(dir, "var-lib-kubelet")
	if err := os.MkdirAll(own, 0o755); err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	// containerd runs in a mount namespace of its own where /var/lib is a
	// tmpfs holding only /var/lib/kubelet, bound to the worker's directory,
	// and /run/netns a tmpfs: the host's /var/lib and /run/netns are left
	// as they are, kubelets side by side do not meet, and every mount the
	// worker makes (containers' root file systems, pods' network
	// namespaces, volumes) goes with the namespace once its processes
	// stopped (Stop).
	script := "mount --make-rprivate / && mount -t tmpfs tmpfs /var/lib && mkdir /var/lib/kubelet && mount --bind " + strconv.Quote(own) +
		" /var/lib/kubelet && mkdir -p /run/netns && mount -t tmpfs tmpfs /run/netns && exec containerd \"$@\""
	if w.Containerd, err = StartProcess("containerd "+c.Name, filepath.Join(dir, "containerd.log"), "unshare",
		"--mount", "--", "sh", "-c", script, "containerd", "--config", filepath.Join(dir, "containerd.toml")); err != nil {
		return nil, err
	}
	// Once containerd answers, its process runs in the namespace unshare
	// made (read before, it can still be this process's own).
	if err := importImages(context.Background(), w.Containerd, sock, c.Images); err != nil {
		return nil, err
	}
	if w.mountNS, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", w.Containerd.Pid())); err != nil {
		return nil, fmt.Errorf("kubetest: containerd's mount namespace: %w", err)
	}
	if own, err := os.Readlink("/proc/self/ns/mnt"); err != nil || own == w.mountNS {
		w.mountNS = ""
		return nil, fmt.Errorf("kubetest: containerd of %s runs in this process's mount namespace (%v)", c.Name, err)
	}
	args := []string{"--config=" + filepath.Join(dir, "kubelet.yaml"), "--bootstrap-kubeconfig=" + c.BootstrapKubeconfig,
		"--kubeconfig=" + w.Kubeconfig, "--cert-dir=" + filepath.Join(dir, "pki"), "--root-dir=/var/lib/kubelet",
		"--hostname-override=" + c.Name, "--node-ip=" + c.NodeIP, "--v=2"}
	// The kubelet joins containerd's mount namespace: the volumes it mounts
	// are where containerd binds them from.
	w.kubelet.name, w.kubelet.log = "kubelet "+c.Name, filepath.Join(dir, "kubelet.log")
	w.kubelet.args = append([]string{fmt.Sprintf("--mount=/proc/%d/ns/mnt", w.Containerd.Pid()), "--", c.Kubelet}, args...)
	if err := w.StartKubelet(); err != nil {
		return nil, err
	}
	ok = true
	return w, nil
}

// StopKubelet stops the kubelet alone, as systemd stopping its unit: the
// pods and containerd run on, and the Node stays as it last reported
// until the node controller's grace period passes.
func (w *Worker) StopKubelet() error {
	if w.Kubelet == nil {
		return nil
	}
	err := w.Kubelet.Stop()
	w.Kubelet = nil
	return err
}

// StartKubelet starts the kubelet again after StopKubelet (a no-op while
// it runs); it picks up its certificate and the running pods.
func (w *Worker) StartKubelet() error {
	if w.Kubelet != nil {
		return nil
	}
	k, err := StartProcess(w.kubelet.name, w.kubelet.log, "nsenter", w.kubelet.args...)
	if err != nil {
		return err
	}
	w.Kubelet = k
	return nil
}

// Stop stops the kubelet, kills the pods (the shims containerd started,
// which outlive it, and their containers), then stops containerd; its
// mount namespace goes with its last process. The host's last worker puts
// back the kernel settings the kubelet changed. Idempotent.
func (w *Worker) Stop() error {
	var errs []error
	if w.Kubelet != nil {
		errs = append(errs, w.Kubelet.Stop())
	}
	if w.mountNS != "" {
		errs = append(errs, killNamespace(w.mountNS, w.Containerd.Pid()))
	}
	if w.Containerd != nil {
		errs = append(errs, w.Containerd.Stop())
	}
	if w.held {
		w.held = false
		errs = append(errs, releaseHost())
	}
	return errors.Join(errs...)
}

// killNamespace kills with SIGKILL every process in mount namespace ns
// but keep, and their descendants (containers live in namespaces of their
// own, under their shim), and waits until they are gone.
func killNamespace(ns string, keep int) error {
	if own, err := os.Readlink("/proc/self/ns/mnt"); err != nil || own == ns {
		return fmt.Errorf("kubetest: refusing to kill every process of mount namespace %s: it is this process's own (%v)", ns, err)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	children := map[int][]int{}
	var roots []int
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == keep {
			continue
		}
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && l == ns {
			roots = append(roots, pid)
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
			// pid (comm) state ppid ...: comm may hold spaces.
			if i := strings.LastIndexByte(string(b), ')'); i > 0 {
				var ppid int
				if _, err := fmt.Sscanf(string(b[i+2:]), "%*c %d", &ppid); err == nil {
					children[ppid] = append(children[ppid], pid)
				}
			}
		}
	}
	var all []int
	for queue := roots; len(queue) > 0; {
		pid := queue[0]
		queue = append(queue[1:], children[pid]...)
		all = append(all, pid)
	}
	for _, pid := range all {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.After(30 * time.Second)
	for _, pid := range all {
		for syscall.Kill(pid, 0) == nil {
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && strings.Contains(string(b), ") Z ") {
				break // a zombie: dead, its parent reaps it
			}
			select {
			case <-deadline:
				return fmt.Errorf("kubetest: process %d of the worker's namespace survived SIGKILL", pid)
			case <-time.After(10 * time.Millisecond): // the pause between two looks at a killed process
			}
		}
	}
	return nil
}

// Netns runs the test process's re-run in a new network namespace with
// loopback up and a veth pair (both ends inside), nico0 holding addrs
// (CIDR), so that a
// kubelet gets a node address that is not loopback and every packet stays
// in a namespace the test made. It returns the command to run.
func Netns(args []string, addrs ...string) *exec.Cmd {
	setup := "ip link set lo up && ip link add nico0 type veth peer name nico1 && ip link set nico1 up && ip link set nico0 up"
	for _, a := range addrs {
		setup += " && ip addr add " + a + " dev nico0"
	}
	return exec.Command("unshare", append([]string{"--net", "--", "sh", "-c", setup + ` && exec "$@"`, "netns"}, args...)...)
}

// EnvInNetns marks the re-run of a test inside its network namespace.
const EnvInNetns = "NICO_KUBE_IN_NETNS"

// InNetns re-runs test name (the running test binary) in a new network
// namespace holding addrs (Netns) and reports its outcome; it returns true
// in the re-run, which does the work, and false in the caller, whose test
// is then done. Everything the re-run starts talks over loopback or the
// namespace's own addresses. Without root, containerd, runc, unshare, ip
// or the CNI plugins it skips (fails with NICO_REQUIRE_KUBE_BINARIES=1).
//
// A benchmark (t a *testing.B) re-runs as one (-test.bench=^name$,
// -test.benchtime=1x) and reports the re-run's metrics as its own.
func InNetns(t testing.TB, name string, addrs ...string) bool {
	t.Helper()
	if os.Getenv(EnvInNetns) == "1" {
		return true
	}
	missing := func(msg string) {
		t.Helper()
		if os.Getenv(EnvRequireBinaries) == "1" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if os.Geteuid() != 0 {
		missing("a real kubelet needs root")
	}
	for _, bin := range []string{"containerd", "runc", "unshare", "ip", "/usr/lib/cni/bridge"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing("a real kubelet needs " + bin + " (.ci/deps.sh installs containerd, runc, containernetworking-plugins)")
		}
	}
	args := []string{os.Args[0], "-test.run=^" + name + "$", "-test.v", "-test.count=1", "-test.timeout=10m"}
	b, bench := t.(*testing.B)
	if bench {
		args = []string{os.Args[0], "-test.run=^$", "-test.bench=^" + name + "$", "-test.benchtime=1x", "-test.v", "-test.count=1", "-test.timeout=10m"}
	}
	cmd := Netns(args, addrs...)
	cmd.Env = append(os.Environ(), EnvInNetns+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("in its network namespace:\n%s", out)
	passed := strings.Contains(string(out), "--- PASS: "+name)
	if bench {
		var metrics map[string]float64
		metrics, passed = benchMetrics(string(out), name)
		passed = passed && !strings.Contains(string(out), "--- FAIL")
		for unit, v := range metrics {
			b.ReportMetric(v, unit)
		}
	}
	if err != nil || !passed {
		t.Fatalf("%s in its network namespace: %v", name, err)
	}
	return false
}

// benchMetrics reads benchmark name's result line out of a benchmark
// run's output ("name-P  1  123 ns/op  4.5 unit ..."): its metrics but
// ns/op, and whether there was one.
func benchMetrics(out, name string) (map[string]float64, bool) {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 2 || (f[0] != name && !strings.HasPrefix(f[0], name+"-")) {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		m := map[string]float64{}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil && f[i+1] != "ns/op" {
				m[f[i+1]] = v
			}
		}
		return m, true
	}
	return nil, false
}
