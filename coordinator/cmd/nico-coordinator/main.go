// Command nico-coordinator runs one coordinator candidate. One candidate in
// the fleet is leader and makes every membership decision.
//
// Exit codes: 0 stopped by a signal, 1 failed, 2 bad configuration or usage
// (see usage).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/homystack/nico/coordinator"
	"github.com/homystack/nico/pkg/config"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/gossip"
	"github.com/homystack/nico/pkg/gossipkey"
	"github.com/homystack/nico/pkg/logging"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/sdnotify"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/pflag"
)

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// usage heads --help.
const usage = `Usage: nico-coordinator [flags]

Runs one coordinator candidate on a control-plane machine; the one elected
leader through etcd makes the fleet's membership, rollout and machine pool
decisions. It reaches etcd through etcd.endpoints or, when those are empty,
the client URLs of the voters the gossip mesh names (gossip.seeds). On a
machine that joins, it waits for the identity its agent writes
(tls.certFile, by default /var/lib/nico/pki/coordinator.crt) before it
starts. Under systemd (Type=notify) it sends READY=1 once it campaigns and
feeds the watchdog while its election session is alive. Every candidate
serves a read-only status page on statusPage.listen (http://127.0.0.1:9490/
by default; any other address needs statusPage.tls.*, docs/statuspage.md).

Exit codes:
  0  stopped by SIGTERM or SIGINT (after resigning leadership)
  1  failed at run time: the gossip mesh could not start, or the candidate failed
  2  bad configuration or usage (the message names the key, the value and what
     is accepted), a TLS identity that does not load, or an etcd client that
     cannot be made for the endpoints

Flags (each also a key of the --config YAML file):
`

func run(args []string, stderr io.Writer) int {
	// The logger's goroutines (metrics, status page, controllers) and run's
	// own error lines share stderr: one lock orders them, whatever it is.
	stderr = &lockedWriter{w: stderr}
	fs := pflag.NewFlagSet("nico-coordinator", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	config.CoordinatorFlags(fs)
	if err := fs.Parse(args); err != nil {
		return usageError(stderr, "%s", err)
	}
	cfg, err := config.LoadCoordinator(fs)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	log, err := logging.New(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	notify := sdnotify.New()
	starting := sync.OnceFunc(extendStart(ctx, notify))
	defer starting()
	// On a machine that joins, the agent writes this identity, and the
	// gossip secret beside it, once its join is through.
	if err := awaitIdentity(ctx, cfg, identityPoll, log); err != nil {
		return 0 // stopped by a signal while waiting
	}
	mesh, err := newMesh(cfg, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	var g coordinator.Gossip
	var watcher gossip.NodeWatcher
	if mesh != nil {
		leave, err := gossip.Background(ctx, mesh, log)
		if err != nil {
			log.Error("gossip", "err", err)
			return 1
		}
		defer leave()
		g, watcher = mesh, mesh
	}
	endpoints, err := etcdEndpoints(ctx, cfg, watcher, log)
	if err != nil {
		if ctx.Err() != nil {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	tlsCfg, err := etcdclient.Files{CA: cfg.TLS.CAFile, Cert: cfg.TLS.CertFile, Key: cfg.TLS.KeyFile}.Load(endpoints)
	if err != nil {
		fmt.Fprintf(stderr, "nico-coordinator: %v\n", err)
		return 2
	}
	cli, err := etcdclient.New(etcdclient.Config{
		Endpoints:        endpoints,
		DialTimeout:      cfg.Etcd.DialTimeout,
		AutoSyncInterval: 5 * time.Second,
		TLS:              tlsCfg,
	})
	if err != nil {
		fmt.Fprintf(stderr, "nico-coordinator: etcd client for %v: %v\n", endpoints, err)
		return 2
	}
	defer cli.Close()
	st, err := store.New(cli, cfg.Store.Prefix)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	starting() // what it waited for is there: READY follows once it campaigns
	if mesh != nil {
		// The machine's agent keeps gossip.secret; this member opens the
		// secret sealed to the machine too, so it never lags behind it.
		if cfg.TLS.CAFile != "" {
			who := gossipkey.Member{Name: cfg.Name, Dir: pki.Dir(filepath.Dir(cfg.TLS.CAFile))}
			go gossipkey.FollowSecret(ctx, st, mesh, who, 2*time.Second, log)
		} else {
			go gossipkey.Follow(ctx, st, mesh, 2*time.Second, log)
		}
		mesh.SetPeerSource(nodePeers(st)) // gossip.go
	}
	c := coordinator.New(coordinator.Config{
		Name:       cfg.Name,
		SessionTTL: cfg.SessionTTL,
		Policy: membership.Policy{
			LearnerStartTimeout:     cfg.LearnerStartTimeout,
			LearnerProgressTimeout:  cfg.LearnerProgressTimeout,
			ReplaceDeadMembersAfter: cfg.ReplaceDeadMembersAfter,
		},
		ResyncInterval: cfg.ResyncInterval,
		HealthTimeout:  cfg.HealthTimeout,
		Gossip:         g,
		Settle:         coordinator.DefaultSettle,
		Clusters:       clusterHooks(cfg, st, cli, log), // clusters.go
	}, st, log)
	stopMetrics, err := serveMetrics(ctx, cfg, c, mesh, log)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer stopMetrics()
	stopPage, err := startStatusPage(ctx, cfg, st, log) // statuspage.go
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	defer stopPage()
	defer notifySystemd(ctx, notify, c, log)()
	if err := c.Run(ctx); err != nil {
		log.Error("coordinator failed", "err", err)
		return 1
	}
	return 0
}

// usageError reports bad usage; --help is not an error.
func usageError(w io.Writer, format string, err error) int {
	if errors.Is(err, pflag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(w, "%s: "+format+"\n", "nico-coordinator", err)
	return 2
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write implements io.Writer.
func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
