// Package statuspagetest drives the status page in real headless Chromium
// (Debian's chromium) over the DevTools protocol, for tests: a browser
// that reaches only loopback, waiting on selectors, screenshots kept as
// test artifacts.
package statuspagetest

import (
	"context"
	"flag"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// EnvRequireChromium makes a browser test fail, not skip, when no
// chromium is installed (make test sets it; make deps installs chromium).
const EnvRequireChromium = "NICO_REQUIRE_CHROMIUM"

// ArtifactsDir is where a browser test keeps its screenshots: the test's
// artifact directory under go test -artifacts, else
// $TMPDIR/nico-artifacts/<name>, kept after the test.
func ArtifactsDir(t *testing.T, name string) string {
	t.Helper()
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	dir := filepath.Join(os.TempDir(), "nico-artifacts", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Chromium finds Debian's chromium on PATH, or skips the test (fails it
// when EnvRequireChromium is set).
func Chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv(EnvRequireChromium) != "" {
			t.Fatalf("chromium is not installed and %s is set: install Debian's chromium (make deps does, as root: apt-get install -y chromium)", EnvRequireChromium)
		}
		t.Skip("chromium is not installed: apt-get install -y chromium (make deps does it as root) to run the status page in a real browser")
	}
	return path
}

// Browser is one headless Chromium tab.
type Browser struct {
	// Ctx is the chromedp context of the tab.
	Ctx context.Context
	t   *testing.T

	mu   sync.Mutex
	urls []string
}

// NewBrowser starts headless Chromium that can reach only loopback: every
// other address goes to a proxy on 127.0.0.1:9 that refuses, and no host
// name resolves. It runs with --no-sandbox as root (Chromium's sandbox
// refuses root) and is closed when the test ends.
func NewBrowser(t *testing.T, ctx context.Context) *Browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox)
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	b := &Browser{Ctx: bctx, t: t}
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			b.mu.Lock()
			b.urls = append(b.urls, e.Request.URL)
			b.mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("chromium: enable the network domain: %v", err)
	}
	return b
}

// Load navigates to page and waits until selector matches, then sets a
// marker in the window that only a reload would lose (Reloaded).
func (b *Browser) Load(page, selector string) {
	b.t.Helper()
	if err := chromedp.Do(b.Ctx, chromedp.Navigate(page)); err != nil {
		b.t.Fatalf("load %s: %v", page, err)
	}
	b.WaitFor(selector)
	if _, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`window.nicoLoaded = "once"; window.nicoLoaded`)); err != nil {
		b.t.Fatal(err)
	}
}

// Reloaded tells whether the page was loaded again since Load.
func (b *Browser) Reloaded() bool {
	b.t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](`window.nicoLoaded || "reloaded"`))
	if err != nil {
		b.t.Fatal(err)
	}
	return v != "once"
}

// WaitFor waits (20 s at most) until selector matches in the page; on
// failure it shows the page's #status.
func (b *Browser) WaitFor(selector string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(selector))); err != nil {
		html, _ := chromedp.Run(b.Ctx, chromedp.OuterHTML(chromedp.CSS("#status")))
		b.t.Fatalf("page never showed %s: %v\n%s", selector, err, html)
	}
}

// Screenshot keeps a PNG of the whole page as dir/name and logs its path.
func (b *Browser) Screenshot(dir, name string) {
	b.t.Helper()
	shot, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot: %s", path)
}

// CheckOnlyLoopback fails the test for every request the page made to a
// host other than 127.0.0.1.
func (b *Browser) CheckOnlyLoopback() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.urls) == 0 {
		b.t.Error("no request was recorded: the check of the hosts saw nothing")
	}
	for _, u := range b.urls {
		if pu, err := url.Parse(u); err != nil || pu.Hostname() != "127.0.0.1" {
			b.t.Errorf("the page requested %s: want only 127.0.0.1", u)
		}
	}
}
