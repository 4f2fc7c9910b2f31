package scale

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/store"
)

// envHost names the file of a hostConfig: set, the test binary runs as an
// agent host (TestMain) instead of running tests.
const envHost = "NICO_SCALE_HOST"

// hostConfig is what one agent host runs: many machines' agents in one
// process, each with its own store client, heartbeat lease, controllers
// and applier, as on its own machine.
type hostConfig struct {
	Endpoints []string      `json:"endpoints"`
	Version   string        `json:"version"`
	ApplyTime time.Duration `json:"applyTime"`
	// Machines are the machines this host may run; Start those it runs
	// from the beginning, the rest on a "start NAME" line.
	Machines []hostMachine `json:"machines"`
}

type hostMachine struct {
	Name   string `json:"name"`
	PKIDir string `json:"pkiDir"`
	Start  bool   `json:"start"`
}

// agentConfig is a data-plane machine's agent with nico-agent's defaults
// (pkg/config): a 10 s heartbeat TTL, joins retried every 2 s.
func (h hostConfig) agentConfig(m hostMachine, applier apply.Applier) agent.Config {
	return agent.Config{
		Name: m.Name, Roles: []api.Role{api.RoleWorker}, Endpoints: h.Endpoints,
		DialTimeout: 5 * time.Second, Prefix: store.DefaultPrefix, HeartbeatTTL: 10 * time.Second,
		RetryInterval: 2 * time.Second, Version: h.Version, Applier: applier,
		PKI: agent.PKIConfig{Dir: pki.Dir(m.PKIDir)},
	}
}

// runHost runs the agents of the hostConfig in path until its standard
// input ends: a line "start NAME" starts a machine's agent, "stop NAME"
// stops it (its heartbeat lease revoked, as a machine that shuts down).
// Each line is answered with "ok LINE" once done, or "error LINE: why".
func runHost(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var cfg hostConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	h := &host{cfg: cfg, log: log, running: map[string]*hosted{}}
	for _, m := range cfg.Machines {
		if m.Start {
			h.start(m.Name)
		}
	}
	out := bufio.NewWriter(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		line := in.Text()
		verb, name, _ := strings.Cut(line, " ")
		var err error
		switch verb {
		case "start":
			err = h.start(name)
		case "stop":
			err = h.stop(name)
		default:
			err = fmt.Errorf("unknown command %q: want start NAME or stop NAME", verb)
		}
		if err != nil {
			fmt.Fprintf(out, "error %s: %v\n", line, err)
		} else {
			fmt.Fprintf(out, "ok %s\n", line)
		}
		out.Flush()
	}
	h.stopAll()
	return 0
}

type host struct {
	cfg     hostConfig
	log     *slog.Logger
	mu      sync.Mutex
	running map[string]*hosted
}

type hosted struct {
	cancel context.CancelFunc
	done   chan error
}

func (h *host) start(name string) error {
	var m hostMachine
	for _, c := range h.cfg.Machines {
		if c.Name == name {
			m = c
		}
	}
	if m.Name == "" {
		return fmt.Errorf("machine %q is not this host's", name)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[name] != nil {
		return fmt.Errorf("machine %q runs already", name)
	}
	a := agent.New(h.cfg.agentConfig(m, &timedApplier{took: h.cfg.ApplyTime}), nil, quietNotifier{}, h.log.With("machine", name))
	ctx, cancel := context.WithCancel(context.Background())
	r := &hosted{cancel: cancel, done: make(chan error, 1)}
	h.running[name] = r
	go func() {
		err := a.Run(ctx)
		if err != nil && ctx.Err() == nil {
			h.log.Error("agent exited", "machine", name, "err", err)
		}
		r.done <- err
	}()
	return nil
}

func (h *host) stop(name string) error {
	h.mu.Lock()
	r := h.running[name]
	delete(h.running, name)
	h.mu.Unlock()
	if r == nil {
		return fmt.Errorf("machine %q does not run", name)
	}
	r.cancel()
	<-r.done
	return nil
}

func (h *host) stopAll() {
	h.mu.Lock()
	rs := h.running
	h.running = map[string]*hosted{}
	h.mu.Unlock()
	for _, r := range rs {
		r.cancel()
	}
	for _, r := range rs {
		<-r.done
	}
}

// timedApplier stands in for a NixOS switch that takes a set time: it
// applies every generation after took and reports it running.
type timedApplier struct {
	took time.Duration
	mu   sync.Mutex
	cur  string
}

func (t *timedApplier) Apply(ctx context.Context, gen apply.Generation) (apply.Result, error) {
	timer := time.NewTimer(t.took)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return apply.Result{}, ctx.Err()
	case <-timer.C:
	}
	top := fmt.Sprintf("/nix/store/%s-%d", gen.Spec.Revision, gen.Number)
	t.mu.Lock()
	t.cur = top
	t.mu.Unlock()
	return apply.Result{Toplevel: top}, nil
}

func (t *timedApplier) Current(context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur, nil
}

type quietNotifier struct{}

func (quietNotifier) Ready() error        { return nil }
func (quietNotifier) Status(string) error { return nil }
func (quietNotifier) Stopping() error     { return nil }
