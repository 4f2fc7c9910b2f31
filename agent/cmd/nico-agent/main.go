// Command nico-agent runs nico's agent on one machine.
//
// Exit codes: 0 stopped by a signal, 1 failed, 2 bad configuration or usage,
// 3 this node was removed from the cluster (systemd: RestartPreventExitStatus=3),
// 4 a generation it applied installs another nico-agent, a recovery operation
// (nicoctl restore or recover --agents) handed the host back, or its configuration
// file or binary changed after it started (a switch it did not run): start
// the agent again (systemd: RestartForceExitStatus=4).
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
	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/metrics"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/spf13/pflag"
)

// Version is set at build time.
var Version = "dev"

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

func run(args []string, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "leave" {
		return leave(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "switch-check" {
		return switchCheck(args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "apply-objects" {
		return applyObjects(args[1:], os.Stdout, stderr)
	}
	if wantsVersion(args) {
		fmt.Fprintln(versionOut, "nico-agent", Version)
		return 0
	}
	if err := firstBootEnv(); err != nil {
		fmt.Fprintf(stderr, "nico-agent: first boot: %v\n", err)
		return 1
	}
	fs := pflag.NewFlagSet("nico-agent", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	config.AgentFlags(fs)
	setUsage(fs, stderr)
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, "%s", err)
	}
	cfg, err := config.LoadAgent(fs)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log, err := logging.New(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var rt member.Runtime = member.NewEmbedded()
	switch cfg.Etcd.Runtime {
	case config.RuntimeExec:
		if rt, err = newExec(cfg.Etcd); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	case config.RuntimeSystemd:
		units, err := member.DialSystemd(context.Background(), 0)
		if err != nil {
			log.Error("etcd.runtime systemd", "err", err)
			return 1
		}
		defer units.Close()
		if rt, err = member.NewSystemd(member.SystemdConfig{Units: units, Unit: cfg.Etcd.Unit, EnvironmentFile: cfg.Etcd.EnvFile, Binary: cfg.Etcd.Binary}); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
	}
	notify := sdnotify.New()
	ac := agentConfig(cfg)
	secrets := newBoundSecrets(cfg.Name, pki.Dir(cfg.PKI.Dir), dirSecrets(cfg))
	ac.OnConnect = secrets.bind
	if ac.Applier, ac.HostFiles, err = newApplier(cfg, secrets); err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	reload := newReloader(fs, cfg, log)
	ac.Applier = reload.Guard(ac.Applier)
	ac.Reloader = reload
	ac.SwitchGuard = agent.SwitchGuardConfig{Stale: reload.Stale}
	var closeHV func()
	ac.Hypervisor, closeHV = newHypervisor(cfg, log)
	defer closeHV()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// A new machine joins first (join.go): the mesh needs the gossip
	// secret its join brings.
	if err := joinFirst(ctx, cfg, log); err != nil {
		log.Error("join", "err", err)
		return 1
	}
	mesh, err := newMesh(cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if mesh != nil {
		// SIGTERM ends ctx: the mesh leaves gracefully, so the others see
		// this node left at once rather than dead after suspicion.
		wait, err := gossip.Background(ctx, mesh, log)
		if err != nil {
			log.Error("gossip", "err", err)
			return 1
		}
		defer wait()
		ac.Gossip = mesh
	}
	var a *agent.Agent
	reg, am := metrics.ForAgent(cfg.Name, func() []controller.Health { return a.Health() }, func() metrics.GossipSource { return metrics.Mesh(mesh) }, cfg.PKI.Dir)
	ac.Metrics = am
	// The recovery API (recovery.go) runs the agent under it: a restore
	// or recovery may hold the host and stop the agent.
	rec := newRecovery(cfg, rt, mesh, log)
	a = agent.New(ac, rt, rec.notifier(notify), log)
	a.ObtainCerts = obtainCerts(cfg, log)
	a.RenewNodeCert = renewNodeCert(cfg, log)
	stopMetrics, err := serveMetrics(ctx, cfg, reg, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer stopMetrics()
	defer serveJoin(ctx, cfg, a.Runtime(), ac.Metrics.JoinRequest, log)()
	defer rec.serve(ctx)()
	// The watchdog is fed while the agent and all its controllers are
	// healthy (agent.Agent.Healthy), or a recovery holds the host.
	watchdog := make(chan struct{})
	go func() {
		defer close(watchdog)
		_ = notify.RunWatchdog(ctx, func() bool { return rec.Held() || a.Healthy() })
	}()
	defer func() { stop(); <-watchdog }()
	switch err := rec.run(ctx, a.Run); {
	case err == nil:
		return 0
	case errors.Is(err, errReleased):
		log.Info("a recovery operation handed the host back; exiting so that the service manager starts the agent again")
		return 4
	case errors.Is(err, agent.ErrRemoved):
		log.Info("this node was removed from the cluster; start the agent again to rejoin")
		return 3
	case errors.Is(err, agent.ErrStandby):
		log.Info("this node's member was removed to make it a standby; exiting so that the service manager starts the agent again")
		return 4
	case errors.Is(err, agent.ErrUpgraded):
		log.Info("exiting so that the service manager starts the nico-agent of the new generation")
		return 4
	default:
		log.Error("agent failed", "err", err)
		return 1
	}
}

// agentConfig maps the loaded configuration onto the agent's.
func agentConfig(cfg config.Agent) agent.Config {
	roles := make([]api.Role, len(cfg.Roles))
	for i, r := range cfg.Roles {
		roles[i] = api.Role(r)
	}
	return agent.Config{
		Name:          cfg.Name,
		Roles:         roles,
		Bootstrap:     cfg.Bootstrap,
		Labels:        cfg.LabelMap(),
		DataDir:       cfg.Etcd.DataDir,
		PeerURL:       cfg.Etcd.PeerURL,
		ClientURL:     cfg.Etcd.ClientURL,
		ClusterToken:  cfg.Etcd.ClusterToken,
		Endpoints:     cfg.Etcd.Endpoints,
		DialTimeout:   cfg.Etcd.DialTimeout,
		Prefix:        cfg.Store.Prefix,
		HeartbeatTTL:  cfg.Heartbeat.TTL,
		RetryInterval: cfg.Join.RetryInterval,
		Version:       Version,
		PKI:           agent.PKIConfig{Dir: pki.Dir(cfg.PKI.Dir), CACertFile: cfg.PKI.CACertFile, CAKeyFile: cfg.PKI.CAKeyFile},
		AgentPathFile: cfg.Generations.AgentPathFile,
		// Where this machine's own Kubernetes components answer, when not
		// where the cluster's spec.probes says.
		ComponentProbes: agent.ComponentProbeConfig{URLs: cfg.ComponentProbes.URLs()},
		// How drain hooks run and a distribution's kubeconfig is published.
		Drain:             agent.DrainConfig{Kubeconfig: cfg.Drain.Kubeconfig, Resync: cfg.Drain.Resync, OutputTail: cfg.Drain.OutputTail},
		KubeconfigPublish: agent.KubeconfigPublishConfig{Interval: cfg.KubeconfigPublish.Interval},
		// The etcd endpoints last reached, for when the mesh no longer
		// understands this machine (agent/endpoints_cache.go).
		EndpointsCache: filepath.Join(cfg.DataDir, "etcd-endpoints.json"),
	}
}

// usageError reports bad usage; --help is not an error.
func usageError(w io.Writer, format string, err error) int {
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(w, "%s: "+format+"\n", "nico-agent", err)
	return 2
}
