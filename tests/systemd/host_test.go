package systemd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/tests/systemd/harness"
)

// fixture is testdata/fixture.json: which store path stands for which
// package in the rendered units, and each host's address.
type fixture struct {
	Packages map[string]string `json:"packages"`
	Hosts    map[string]struct {
		Address string `json:"address"`
		// PreSwitchCheck is the script switch-to-configuration runs
		// first (system.preSwitchChecks), "" when there is none.
		PreSwitchCheck string `json:"preSwitchCheck"`
	} `json:"hosts"`
}

// fixturesDir is testdata, or NICO_SYSTEMD_FIXTURES for a trial run on
// fixtures rendered from another copy of the module
// (tests/systemd/render/fixtures.sh write DIR).
func fixturesDir() string {
	if d := os.Getenv("NICO_SYSTEMD_FIXTURES"); d != "" {
		return d
	}
	return "testdata"
}

func loadFixture(t *testing.T) fixture {
	t.Helper()
	var f fixture
	b, err := os.ReadFile(filepath.Join(fixturesDir(), "fixture.json"))
	if err == nil {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		t.Fatalf("testdata/fixture.json (make systemd-fixtures): %v", err)
	}
	return f
}

// hostFiles reads testdata/<name>: the host's files, by path in its root.
func hostFiles(t *testing.T, name string) map[string]harness.File {
	t.Helper()
	files := map[string]harness.File{}
	root := filepath.Join(fixturesDir(), name)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		mode := os.FileMode(0o444) // as in the store
		if strings.Contains(rel, "/bin/") {
			mode = 0o555
		}
		files["/"+rel] = harness.File{Data: b, Mode: mode}
		return nil
	})
	if err != nil {
		t.Fatalf("fixture of %s: %v", name, err)
	}
	return files
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// programs builds nico-agent, nico-coordinator and nicoctl once for the
// whole tier and returns their directory; NICO_SYSTEMD_PROGRAMS names a
// directory of them built elsewhere instead (another branch's, say).
func programs(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("NICO_SYSTEMD_PROGRAMS"); d != "" {
		return d
	}
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "nico-sd-bin-"); buildErr != nil {
			return
		}
		// Readable by the units' other users (etcd, DynamicUser=).
		if buildErr = os.Chmod(binDir, 0o755); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./agent/cmd/nico-agent", "./coordinator/cmd/nico-coordinator", "./coordinator/cmd/nicoctl")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// etcdUID is the etcd user's, as users.users.etcd of nixpkgs' module makes it.
const etcdUID = 899

// guest is one booted host of the fixture.
type guest struct {
	*harness.Host
	t       *testing.T
	address string
	nicoBin string // the store path's bin the programs are bound on
	sd      *sddbus.Conn
}

// cluster is the bridge the guests of one test share.
type cluster struct {
	t      *testing.T
	fx     fixture
	bridge *harness.Bridge
	guests map[string]*guest
}

func newCluster(t *testing.T) *cluster {
	harness.Skip(t)
	b, err := harness.NewBridge(t)
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, fx: loadFixture(t), bridge: b, guests: map[string]*guest{}}
}

// boot boots the fixture's host name with the real programs in place of
// the store paths its units name, on the bridge at its address.
func (c *cluster) boot(ctx context.Context, name string, opts ...func(*harness.Config)) *guest {
	t := c.t
	t.Helper()
	h, ok := c.fx.Hosts[name]
	if !ok {
		t.Fatalf("no host %s in testdata/fixture.json", name)
	}
	bins := etcdtest.Binaries(t)
	etcd := bins[len(bins)-1].Path
	pk := c.fx.Packages
	binds := []harness.Bind{
		{Src: programs(t), Dst: pk["nico"] + "/bin", RO: true},
		{Src: etcd, Dst: pk["etcd"] + "/bin/etcd", RO: true},
		{Src: "/usr/share/zoneinfo", Dst: pk["tzdata"] + "/share/zoneinfo", RO: true},
	}
	// Debian's tools stand in for the NixOS packages of the same programs.
	for _, p := range []string{"coreutils", "findutils", "gnugrep", "gnused", "systemd", "bash", "nix", "git"} {
		binds = append(binds, harness.Bind{Src: "/usr/bin", Dst: pk[p] + "/bin", RO: true}, harness.Bind{Src: "/usr/sbin", Dst: pk[p] + "/sbin", RO: true})
	}
	cfg := harness.Config{
		Name:  name,
		Files: hostFiles(t, name),
		Users: []harness.User{{Name: "etcd", UID: etcdUID, Home: "/var/lib/etcd"}},
		Binds: binds,
	}
	for _, o := range opts {
		o(&cfg)
	}
	hh, err := harness.Boot(ctx, t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := &guest{Host: hh, t: t, address: h.Address, nicoBin: pk["nico"] + "/bin"}
	if err := c.bridge.Attach(ctx, hh, h.Address+"/24"); err != nil {
		t.Fatal(err)
	}
	if g.sd, err = hh.Systemd(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.sd.Close)
	c.guests[name] = g
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("NICO_SYSTEMD_JOURNAL") == "1" {
			t.Logf("%s's journal:\n%s", name, g.journal(context.Background(), 120))
		}
	})
	return g
}

// start starts a unit and waits for its job: for a Type=notify unit, until
// it sent READY=1.
func (g *guest) start(ctx context.Context, unit string) error {
	ch := make(chan string, 1)
	if _, err := g.sd.StartUnitContext(ctx, unit, "replace", ch); err != nil {
		return fmt.Errorf("%s: start %s: %w", g.Name, unit, err)
	}
	select {
	case res := <-ch:
		if res != "done" {
			return fmt.Errorf("%s: start %s: job %s", g.Name, unit, res)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: start %s: %w", g.Name, unit, ctx.Err())
	}
}

// prop reads a unit's property of the Service interface (or Unit's, when
// the service has none of that name).
func (g *guest) prop(ctx context.Context, unit, name string) any {
	p, err := g.sd.GetServicePropertyContext(ctx, unit, name)
	if err != nil {
		if p, err = g.sd.GetUnitPropertyContext(ctx, unit, name); err != nil {
			g.t.Fatalf("%s: %s's %s: %v", g.Name, unit, name, err)
		}
	}
	return p.Value.Value()
}

// sh runs a shell command in the guest, as root in a login-like
// environment (/etc/set-environment, as NixOS's shells source it).
func (g *guest) sh(ctx context.Context, script string) (string, error) {
	out, err := g.Exec(ctx, "/bin/sh", "-c", ". /etc/set-environment; PATH="+g.nicoBin+":$PATH; "+script)
	return string(out), err
}

// members returns the etcd members as nicoctl get members shows them.
func (g *guest) members(ctx context.Context) ([]member, error) {
	out, err := g.sh(ctx, "nicoctl get members -o json")
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, out)
	}
	var ms []member
	if err := json.Unmarshal([]byte(out), &ms); err != nil {
		return nil, fmt.Errorf("nicoctl get members: %w: %s", err, out)
	}
	return ms, nil
}

// member is what the tests read of nicoctl's MemberView.
type member struct {
	ID     string `json:"id"`
	Name   string `json:"name"` // etcd's name, "" until it started
	Node   string `json:"node"` // the node with its peer URL
	Status string `json:"status"`
}

// voters returns the voting members' names, sorted.
func voters(ms []member) []string {
	var names []string
	for _, m := range ms {
		if m.Status == "voter" {
			names = append(names, m.Name)
		}
	}
	slices.Sort(names)
	return names
}

// waitFor polls cond until it holds or ctx ends (then it fails the test
// with cond's last error).
func (g *guest) waitFor(ctx context.Context, what string, cond func() error) {
	g.t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			g.t.Fatalf("%s: %s: %v (%v)", g.Name, what, err, ctx.Err())
		case <-tick.C:
		}
	}
}

func (g *guest) journal(ctx context.Context, lines int) string {
	out, err := g.Exec(ctx, "journalctl", "--no-pager", "-o", "short-monotonic", "-n", fmt.Sprint(lines), "-u", "nico-agent", "-u", "etcd", "-u", "nico-coordinator")
	if err != nil {
		return fmt.Sprintf("%v\n%s", err, out)
	}
	return string(out)
}

var errNotYet = errors.New("not yet")

// startNoBlock queues a unit's start without waiting for its job.
func (g *guest) startNoBlock(ctx context.Context, unit string) {
	g.t.Helper()
	if _, err := g.sd.StartUnitContext(ctx, unit, "replace", nil); err != nil {
		g.t.Fatalf("%s: start %s: %v", g.Name, unit, err)
	}
}

// memberOf returns the member of the node or etcd name name, if any.
func memberOf(ms []member, name string) (member, bool) {
	for _, m := range ms {
		if m.Name == name || m.Node == name {
			return m, true
		}
	}
	return member{}, false
}
