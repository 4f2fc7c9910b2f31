package member_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/member/systemdtest"
	"github.com/homystack/nico/pkg/testwait"
)

// publishLost is a systemdtest.Service standing for an etcd that lost its
// publish on every start: its peer URL lists it with its client URLs, its
// client URL does not answer, and its start never completes (a Type=notify
// unit that sends no READY=1) until it is stopped or killed.
type publishLost struct {
	peerURL, clientURL string

	mu     sync.Mutex
	starts int
	srv    *http.Server
	served chan struct{} // closed when srv's Serve returned
	stop   chan struct{}
	done   chan struct{}
}

func newPublishLost(cfg member.Config) *publishLost {
	d := make(chan struct{})
	close(d)
	return &publishLost{peerURL: cfg.PeerURL, clientURL: cfg.ClientURL, done: d}
}

func (p *publishLost) Start(context.Context) error {
	u, err := url.Parse(p.peerURL)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		return err
	}
	members := []map[string][]string{{"peerURLs": {p.peerURL}, "clientURLs": {p.clientURL}}}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/members" {
			http.NotFound(w, r)
			return
		}
		_ = json.NewEncoder(w).Encode(members)
	})}
	stop, done, served := make(chan struct{}), make(chan struct{}), make(chan struct{})
	p.mu.Lock()
	p.starts++
	p.srv, p.stop, p.done, p.served = srv, stop, done, served
	p.mu.Unlock()
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	<-stop
	return errors.New("killed before it was ready")
}

func (p *publishLost) Stop(context.Context) error {
	p.mu.Lock()
	srv, stop, done, served := p.srv, p.stop, p.done, p.served
	p.srv = nil
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		<-served
		close(stop)
		close(done)
	}
	return nil
}

func (p *publishLost) Done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

func (p *publishLost) Err() error { return nil }

func (p *publishLost) startCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.starts
}

// publishLostFixture is a Systemd runtime whose etcd.service is a
// publishLost, and the Config of a first start into an existing cluster.
func publishLostFixture(t *testing.T) (*member.Systemd, *systemdtest.Units, *publishLost, member.Config) {
	cfg := configFor(t, "lost", false)
	cfg.ClusterState = member.StateExisting
	cfg.InitialCluster = "lost=" + cfg.PeerURL
	svc := newPublishLost(cfg)
	units := systemdtest.NewUnits()
	units.Add(member.DefaultUnit, svc)
	rt, err := member.NewSystemd(member.SystemdConfig{Units: units, Journal: units,
		EnvironmentFile: filepath.Join(t.TempDir(), "etcd.env"), TLSInEnvironment: true})
	if err != nil {
		t.Fatal(err)
	}
	stopAll(t, rt)
	return rt, units, svc, cfg
}

// TestSystemdRestartsALostPublishOnce: on a first start into an existing
// cluster, a member that lost its publish is killed and its unit started
// again, once; one that lost it again is waited for until ctx ends.
func TestSystemdRestartsALostPublishOnce(t *testing.T) {
	t.Parallel()
	rt, units, svc, cfg := publishLostFixture(t)
	ctx, cancel := context.WithTimeout(caseContext(t), 3*time.Second)
	defer cancel()
	err := rt.Start(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start of a member that loses its publish each time = %v, want the deadline", err)
	}
	want := []string{"start etcd.service", "kill etcd.service", "start etcd.service", "stop etcd.service"}
	if got := units.Jobs(); !slices.Equal(got, want) {
		t.Fatalf("jobs = %q, want %q", got, want)
	}
	if n := svc.startCount(); n != 2 {
		t.Fatalf("the service started %d times, want 2", n)
	}
}

// TestSystemdKeepsAMemberWithData: a member with data of its own is not a
// first start: a lost publish is waited out, never killed.
func TestSystemdKeepsAMemberWithData(t *testing.T) {
	t.Parallel()
	rt, units, _, cfg := publishLostFixture(t)
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "member", "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(caseContext(t), time.Second)
	defer cancel()
	if err := rt.Start(ctx, cfg); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v, want the deadline", err)
	}
	want := []string{"start etcd.service", "stop etcd.service"}
	if got := units.Jobs(); !slices.Equal(got, want) {
		t.Fatalf("jobs = %q, want %q", got, want)
	}
}

// TestSystemdStopBetweenKillAndRestart: a Stop that comes while the
// runtime kills a member that lost its publish ends the Start; the unit is
// not started again, and Stop returns once the Start has ended.
func TestSystemdStopBetweenKillAndRestart(t *testing.T) {
	t.Parallel()
	rt, units, svc, cfg := publishLostFixture(t)
	ctx := caseContext(t)
	stopped := make(chan error, 1)
	units.FailJobs(func(verb, _ string) error {
		if verb != "kill" {
			return nil
		}
		go func() { stopped <- rt.Stop(ctx) }()
		// Stop's stop job completes before the kill.
		testwait.For(t, caseTimeout, "Stop's stop job", func() (bool, string) {
			st, _ := units.UnitState(ctx, member.DefaultUnit)
			jobs := units.Jobs()
			return st.Exited() && slices.Contains(jobs, "stop etcd.service"), st.String() + " " + strings.Join(jobs, ", ")
		})
		return nil
	})
	err := rt.Start(ctx, cfg)
	if err == nil || !strings.Contains(err.Error(), "stopped before serving") {
		t.Fatalf("Start stopped between kill and restart = %v, want stopped before serving", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if n := svc.startCount(); n != 1 {
		t.Fatalf("the service started %d times, want once", n)
	}
	if st, _ := units.UnitState(ctx, member.DefaultUnit); !st.Exited() {
		t.Fatalf("unit %s after Stop, want inactive", st)
	}
	if got := units.Jobs(); slices.Contains(got[slices.Index(got, "kill etcd.service"):], "start etcd.service") {
		t.Fatalf("jobs = %q: started again after Stop", got)
	}
	waitDone(ctx, t, rt)
	// Stop waited for the Start, which recorded why it ended.
	if err := rt.Err(); err == nil || !strings.Contains(err.Error(), "stopped before serving") {
		t.Fatalf("Err after a Stop between kill and restart = %v, want stopped before serving", err)
	}
}
