package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/homystack/nico/agent"
	"github.com/homystack/nico/agent/internal/switchcheck"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/pflag"
)

// switchCheck is the pre-switch check of a control-plane host
// (agent/internal/switchcheck): switch-to-configuration runs it with the
// new generation's toplevel and its action; it exits 0 once this host may
// switch.
func switchCheck(args []string, stderr io.Writer) int {
	fs := pflag.NewFlagSet("nico-agent switch-check", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	config.AgentFlags(fs)
	wait := fs.Duration("wait", switchcheck.DefaultWait, "how long to wait for the switch slot before refusing the switch")
	answer := fs.Duration("answer-timeout", switchcheck.DefaultAnswerTimeout, "how long to wait for a coordinator's first answer; with none, a host that runs an etcd member does not switch")
	hold := fs.Duration("hold", 0, "how long the slot may be held once granted before the leader takes it back (0: 10m)")
	current := fs.String("current-system", "/run/current-system", "the link to the running generation")
	currentConfig := fs.String("current-config", "/etc/nico/agent.yaml", "the running generation's agent configuration, whose etcd.binary is the running etcd")
	force := fs.Bool("force", false, "switch without asking for the slot (as NICO_SWITCH_GUARD=off)")
	setUsage(fs, stderr)
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, "%s", err)
	}
	if fs.NArg() != 2 {
		fmt.Fprintf(stderr, "nico-agent switch-check: want 2 arguments, the new toplevel and the action (as switch-to-configuration passes them), got %d: %q\n", fs.NArg(), fs.Args())
		return switchcheck.Usage
	}
	cfg, err := config.LoadAgent(fs)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return switchcheck.Usage
	}
	c := &switchcheck.Check{
		Node: cfg.Name, ControlPlane: cfg.HasRole(config.RoleControlPlane), PeerURL: cfg.Etcd.PeerURL,
		Toplevel: fs.Arg(0), Action: fs.Arg(1), CurrentSystem: *current,
		Override: *force || os.Getenv("NICO_SWITCH_GUARD") == "off",
		Wait:     *wait, AnswerTimeout: *answer, Hold: *hold,
		CurrentEtcd: runningEtcd(*currentConfig), NewEtcd: cfg.Etcd.Binary, EtcdVersion: member.BinaryVersion,
		LocalMember: func() bool { _, err := os.Stat(filepath.Join(cfg.Etcd.DataDir, "member")); return err == nil },
		Out:         stderr,
	}
	var closeStore func()
	c.Dial = func(context.Context) (st *store.Store, err error) {
		// With no etcd.endpoints (learned from the mesh), the endpoints
		// the running agent last reached besides the local member: this
		// host's own member may be the one that is down.
		if len(cfg.Etcd.Endpoints) == 0 {
			cfg.Etcd.Endpoints, _ = agent.ReadEndpointsCache(agentConfig(cfg).EndpointsCache)
		}
		st, closeStore, err = nodeStore(cfg)
		return st, err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code := c.Run(ctx)
	if closeStore != nil {
		closeStore()
	}
	return code
}

// runningEtcd is the etcd.binary of the agent configuration at path, ""
// when there is none to read (a first switch).
func runningEtcd(path string) string {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return ""
	}
	fs := pflag.NewFlagSet("current", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	config.AgentFlags(fs)
	if err := fs.Parse([]string{"--config", path}); err != nil {
		return ""
	}
	cfg, err := config.LoadAgent(fs)
	if err != nil {
		return ""
	}
	return cfg.Etcd.Binary
}
