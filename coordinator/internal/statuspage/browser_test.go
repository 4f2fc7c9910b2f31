package statuspage

import (
	"context"
	"flag"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdtest"
	"github.com/homystack/nico/pkg/store"
	"go.etcd.io/etcd/server/v3/embed"
)

// EnvRequireChromium makes TestStatusPageInChromium fail, not skip, when
// no chromium is installed (make test sets it; make deps installs it).
const EnvRequireChromium = "NICO_REQUIRE_CHROMIUM"

// artifactsDir is where the browser test keeps its screenshot: the test's
// artifact directory under go test -artifacts, else a directory kept after
// the test.
func artifactsDir(t *testing.T) string {
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	dir := filepath.Join(os.TempDir(), "nico-artifacts", "statuspage")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chromium finds Debian's chromium, or skips (fails under make test).
func chromium(t *testing.T) string {
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv(EnvRequireChromium) != "" {
			t.Fatalf("chromium is not installed and %s is set: install Debian's chromium (make deps does, as root: apt-get install -y chromium)", EnvRequireChromium)
		}
		t.Skip("chromium is not installed: apt-get install -y chromium (make deps does it as root) to run the status page in a real browser")
	}
	return path
}

// browser starts headless Chromium that can reach only loopback: every
// other address goes to a proxy on 127.0.0.1:9 that refuses, and no host
// name resolves. It records the URL of every request the page makes.
func browser(t *testing.T, ctx context.Context) (context.Context, func() []string) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses to run as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	var mu sync.Mutex
	var urls []string
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			urls = append(urls, e.Request.URL)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("chromium: enable the network domain: %v", err)
	}
	return bctx, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), urls...) }
}

// TestStatusPageInChromium loads the page in real headless Chromium against
// a real etcd cluster, then joins a second member as etcd's learner flow
// does it (MemberAddAsLearner, start it, MemberPromote) while writing the
// store objects the agent and the leader write, and checks that the page
// shows the learner, then the voter, without a reload. It keeps a
// screenshot (path in the log).
func TestStatusPageInChromium(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := etcdtest.StartWith(t, etcdtest.Options{Members: 1})
	st, err := store.New(etcdtest.NewClient(t, c.Endpoints()...), store.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	m0 := c.Members[0]
	put(t, st, node(m0.Name, api.MemberVoter))
	live := api.NewLiveness()
	live.Status.Nodes = map[string]api.NodeLiveness{m0.Name: {State: "alive", Since: time.Now()}}
	put(t, st, live)
	addr := serve(t, &Server{Listen: "127.0.0.1:0", Hub: &Hub{Store: st, Debounce: 100 * time.Millisecond}})
	page := "http://" + addr + "/"

	b, requests := browser(t, ctx)
	if err := chromedp.Do(b, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS(`#member-m0[data-role="voter"]`))); err != nil {
		t.Fatalf("load %s: %v", page, err)
	}
	// A reload would lose this: the checks below see it still there.
	marker, err := chromedp.Run(b, chromedp.Evaluate[string](`window.nicoLoaded = "once"; window.nicoLoaded`))
	if err != nil {
		t.Fatal(err)
	}
	waitLive(t, b)

	// The leader adds the learner and journals the join.
	peer, client := etcdtest.URLsFor(t, false)
	add, err := st.Client().MemberAddAsLearner(ctx, []string{peer})
	if err != nil {
		t.Fatal(err)
	}
	id := api.MemberID(add.Member.ID)
	op := api.NewOperation("join-m1")
	op.Spec = api.OperationSpec{Type: api.OpJoin, Node: "m1", MemberID: id, PeerURL: peer}
	op.Status = api.OperationStatus{Phase: api.OpRunning, Step: api.StepLearner, StepSince: time.Now()}
	op.Record(time.Now(), "m0", "added m1 as a learner; waiting for it to start")
	put(t, st, op)
	if _, err := st.Client().Put(ctx, store.ActiveOpKey, op.Metadata.Name); err != nil {
		t.Fatal(err)
	}
	put(t, st, node("m1", api.MemberLearner))
	waitFor(t, b, `#member-`+id.String()+`[data-role="learner"]`) // not started: no name yet
	waitFor(t, b, `#op[data-step="Learner"]`)

	// The agent starts the member; it reports in.
	m1 := startLearner(t, c, "m1", peer, client)
	defer m1.Close()
	n1 := node("m1", api.MemberLearner)
	n1.Status.Message = "member started"
	put(t, st, n1)
	waitFor(t, b, `#member-m1[data-role="learner"]`)
	screenshot(t, b, "join-learner.png")

	// The leader promotes it once it has caught up, and closes the join.
	promote(t, ctx, st, uint64(id))
	put(t, st, node("m1", api.MemberVoter))
	if _, err := st.Client().Delete(ctx, store.ActiveOpKey); err != nil {
		t.Fatal(err)
	}
	waitFor(t, b, `#member-m1[data-role="voter"]`)
	waitFor(t, b, `#node-m1[data-member="voter"]`)

	still, err := chromedp.Run(b, chromedp.Evaluate[string](`window.nicoLoaded || "reloaded"`))
	if err != nil {
		t.Fatal(err)
	}
	if still != marker {
		t.Errorf("the page was reloaded (marker %q, want %q): the join must show up live", still, marker)
	}
	screenshot(t, b, "join-voter.png")
	for _, u := range requests() {
		if pu, err := url.Parse(u); err != nil || pu.Hostname() != "127.0.0.1" {
			t.Errorf("the page requested %s: want only 127.0.0.1", u)
		}
	}
}

// waitLive waits until the page's event stream is open.
func waitLive(t *testing.T, b context.Context) {
	t.Helper()
	waitFor(t, b, `body:not(.stale) #conn`)
}

// waitFor waits until selector matches in the page.
func waitFor(t *testing.T, b context.Context, selector string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(selector))); err != nil {
		html, _ := chromedp.Run(b, chromedp.OuterHTML(chromedp.CSS("#status")))
		t.Fatalf("page never showed %s: %v\n%s", selector, err, html)
	}
}

// startLearner starts an embedded member that joins c as its learner.
func startLearner(t *testing.T, c *etcdtest.Cluster, name, peer, client string) *embed.Etcd {
	t.Helper()
	parts := []string{name + "=" + peer}
	for _, m := range c.Members {
		parts = append(parts, m.Name+"="+m.PeerURL)
	}
	cfg, err := etcdtest.NewConfig(name, filepath.Join(t.TempDir(), "etcd"), peer, client, strings.Join(parts, ","), embed.ClusterStateFlagExisting)
	if err != nil {
		t.Fatal(err)
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("learner not ready after 30s")
	}
	return e
}

// promote promotes learner id once etcd lets it (it has caught up).
func promote(t *testing.T, ctx context.Context, st *store.Store, id uint64) {
	t.Helper()
	for {
		_, err := st.Client().MemberPromote(ctx, id)
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("promote %x: %v", id, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// screenshot keeps a PNG of the whole page as name in artifactsDir.
func screenshot(t *testing.T, b context.Context, name string) {
	t.Helper()
	shot, err := chromedp.Run(b, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactsDir(t), name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
