package ctl

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// restoreOpts are the flags of restore.
type restoreOpts struct {
	from, store, target, fleet, journal string
	agents                              []string
	bump                                uint64
	abort, latest, again                bool
	handBackWait                        time.Duration
}

func (a *app) restoreCmd() *cobra.Command {
	var o restoreOpts
	c := &cobra.Command{
		Use:   "restore (--from SNAPSHOT | --latest) (--agents HOST:PORT,... | --fleet FILE) [--target NODE]",
		Short: "Restore the etcd cluster from a snapshot as a new cluster, then rejoin the other members",
		Long: `Restore the fleet's etcd cluster from a snapshot, as one journaled operation
(docs/disaster-recovery.md).

--from names a snapshot file, or a snapshot of the snapshot store by its name (as
'nicoctl snapshot list' shows it); --latest takes the store's newest. The store is --store,
else the spec.snapshots.destination of the EtcdCluster of the cluster at --endpoints. A
named snapshot is fetched beside the journal (its size and sha256 checked against its
metadata) and removed once the restore is done; a name the store does not hold exits 4.

Before anything changes, nicoctl checks the snapshot (etcd's appended sha256, its bolt
database, that it holds this fleet's EtcdCluster and a Node record for the target) and,
when the cluster still answers at --endpoints, that the target is one of its voters and
that no other operation holds the one-change slot (it then holds it). Refusals exit 3
and change nothing. Then every member of --fleet is stopped and its data dir fenced
(never served again), the snapshot is restored onto the target as a new cluster (a new
cluster ID, the revision bumped by --bump-revision and marked compacted, so watchers
re-list), the target starts, the operation is journaled in the new cluster, and the
other members are wiped and rejoin one at a time as learners, each promoted once in
sync. Control-plane hosts that were not voters (standbys) are left as they are. From the
first step to the last the coordinators plan nothing on the cluster: the restored data
names the old cluster's ID until the restore hands it over.

The journal (--journal) is saved after every step: run the same command again to resume
a restore that was interrupted; once the journal says done, running it again only hands
back what is left and starts no new restore. Restoring a cluster that is itself the
product of a restore is refused unless --again is given: the refusal says how many
revisions it has committed since, which the new restore would discard. Members of --fleet
still served by their agent must be stopped (systemctl stop nico-agent) first; nicoctl
says which.

With --agents instead of --fleet, no fleet file is needed and no data dir need be on
this host: nicoctl finds the control-plane agents from the given ones (each names the
others of its gossip mesh) and each agent does its own host's part over its recovery
API (mutual TLS: --tls.* must be the fleet CA and a root certificate): it stops its
member, fences it, receives the snapshot (checked by its sha256), restores or rejoins,
and at the end serves its member again. The live cluster is also asked through the client
URLs of the members the agents report serving, when --endpoints does not reach it. The journal is then ~/.local/state/nico/
recovery.journal.json unless --journal names one. --target defaults to the first control-plane agent by name.
Before anything is stopped, every agent the restore acts on must answer: nicoctl waits
for those that do not (up to 1m, saying which), then refuses, having changed nothing.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error { return a.restore(cmd.Context(), o) }),
	}
	c.Flags().StringVar(&o.from, "from", "", "the snapshot: a name in the snapshot store ('nicoctl snapshot list') or a file (etcd snapshot save format)")
	c.Flags().BoolVar(&o.latest, "latest", false, "restore the newest snapshot of the snapshot store (instead of --from)")
	c.Flags().StringVar(&o.store, "store", "", "the snapshot store a --from name or --latest reads: "+strings.TrimPrefix(destinationHelp, "snapshot store: "))
	c.Flags().StringVar(&o.target, "target", "", "the voter to restore onto (default: the first member of --fleet; with --agents, the first control-plane agent by node name)")
	c.Flags().StringVar(&o.fleet, "fleet", "", "YAML file naming the control-plane members: name, dataDir, peerURL, clientURL (docs/disaster-recovery.md)")
	c.Flags().StringVar(&o.journal, "journal", "", "the operation's journal file, shared with recover so that one runs at a time (default: FILE.journal.json beside --fleet)")
	c.Flags().StringSliceVar(&o.agents, "agents", nil, "restore through the control-plane agents instead of --fleet: host:port of one or more agents' recovery API (recovery.listen); the others are found from their gossip mesh")
	c.Flags().BoolVar(&o.abort, "abort", false, "abandon the unfinished restore or recovery of the journal while it is still at its first step (nothing restored): remove its fences (with --agents: hand each host back to its agent), free the live cluster's slot")
	c.Flags().BoolVar(&o.again, "again", false, "restore a cluster that is itself the product of a restore, discarding every write it acknowledged since (refused without it, naming how many revisions that is)")
	c.Flags().DurationVar(&o.handBackWait, "hand-back-wait", releaseWait, handBackHelp)
	c.Flags().Uint64Var(&o.bump, "bump-revision", 1_000_000_000, "how far past the snapshot's revision the restored cluster starts (etcdutl's --bump-revision); 0 keeps it and does not mark it compacted")
	return c
}

func (a *app) restore(ctx context.Context, o restoreOpts) error {
	if o.abort && len(o.agents) > 0 {
		return a.abortThroughAgents(ctx, o)
	}
	if o.abort {
		return a.abort(ctx, o)
	}
	if (o.from == "") == !o.latest {
		return withCode(ExitUsage, errors.New("restore needs --from SNAPSHOT or --latest (one of them), and --agents HOST:PORT or --fleet FILE"))
	}
	if len(o.agents) > 0 {
		return a.restoreThroughAgents(ctx, o)
	}
	if o.fleet == "" {
		return withCode(ExitUsage, errors.New("restore needs --agents HOST:PORT or --fleet FILE"))
	}
	if o.journal == "" {
		o.journal = journalOf(o.fleet)
	}
	jf := restore.FileJournal{Path: o.journal}
	j, resumed, err := a.resumable(jf, restore.KindRestore, func(j *restore.Journal) bool {
		return o.sameSource(j) && (o.target == "" || j.Target == o.target)
	})
	if err != nil {
		return err
	}
	now := a.now()
	token := "nico-restore-" + now.UTC().Format("20060102t150405")
	if resumed {
		token = "nico-" + j.ID
	}
	fleet, err := restore.LoadFleet(o.fleet, token, a.logger())
	if err != nil {
		return withCode(ExitUsage, err)
	}
	defer fleet.Close()
	if !resumed {
		if o.target == "" {
			o.target = fleet.Names()[0]
		}
		var src restoreSource
		if j, src, err = a.prepareRestore(ctx, o, fleet.Names(), now); err != nil {
			return err
		}
		fleet.ClusterToken = "nico-" + j.ID
		if err := jf.Save(j); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s: snapshot %s verified (sha256 %s, revision %d, %d keys); restoring onto %s, then %v rejoin\n",
			j.ID, src.describe(), j.Snapshot.SHA256[:12], j.Snapshot.Revision, j.Snapshot.Keys, j.Target, j.Others)
	}
	if err := a.runJournal(ctx, fleet, jf, j); err != nil {
		return err
	}
	if j.Snapshot.Name != "" {
		// The fetched copy served its purpose; the store keeps the original.
		_ = os.Remove(j.Snapshot.Path)
	}
	return nil
}

// abort abandons the journal's operation while nothing is past its first
// step: the old cluster is then whole (its members fenced only on disk).
func (a *app) abort(ctx context.Context, o restoreOpts) error {
	if o.fleet == "" {
		return withCode(ExitUsage, errors.New("restore --abort needs --fleet FILE"))
	}
	if o.journal == "" {
		o.journal = journalOf(o.fleet)
	}
	jf := restore.FileJournal{Path: o.journal}
	j, ok, err := jf.Load()
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if !ok || j.Step == restore.StepDone {
		return withCode(ExitNotFound, fmt.Errorf("no unfinished restore or recovery in %s", o.journal))
	}
	if j.Step != restore.StepStop {
		return withCode(ExitRefused, fmt.Errorf("%s is at step %s, past stopping the old cluster: it cannot be abandoned, run its command again to finish it", j.ID, j.Step))
	}
	fleet, err := restore.LoadFleet(o.fleet, "", a.logger())
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if err := fleet.Unfence(j.ID); err != nil {
		return err
	}
	if live := a.liveClient(ctx); live != nil {
		defer live.Close()
		if err := restore.ReleaseLive(ctx, live, a.cfg.Prefix, j, "aborted with nicoctl restore --abort"); err != nil {
			return err
		}
	}
	if err := os.Rename(o.journal, o.journal+".aborted"); err != nil {
		return fmt.Errorf("put the journal aside: %w", err)
	}
	fmt.Fprintf(a.stdout, "%s aborted: its fences removed, the live cluster's slot freed (when it answered); the journal is now %s.aborted\n", j.ID, o.journal)
	return nil
}

// journalOf is the default journal of the fleet file fleet: one for
// restore and recover, so that a second one is refused while one is
// unfinished, whichever snapshot it names.
func journalOf(fleet string) string { return fleet + ".journal.json" }

// resumable loads the journal at jf: an unfinished one of kind that
// matches is resumed, another unfinished one refuses (one restore or
// recovery at a time).
func (a *app) resumable(jf restore.FileJournal, kind restore.Kind, same func(*restore.Journal) bool) (*restore.Journal, bool, error) {
	j, ok, err := jf.Load()
	if err != nil {
		return nil, false, withCode(ExitUsage, err)
	}
	if !ok || j.Step == restore.StepDone {
		return nil, false, nil
	}
	if j.Kind != kind || !same(j) {
		return nil, false, withCode(ExitRefused, fmt.Errorf("%w: %s (%s onto %s) is at step %s in %s: finish it first (run its command again) or move the journal away", restore.ErrBusy, j.ID, j.Kind, j.Target, j.Step, jf.Path))
	}
	fmt.Fprintf(a.stdout, "%s: resuming at step %s (journal %s)\n", j.ID, j.Step, jf.Path)
	return j, true, nil
}

// runJournal runs j to its end, printing each step.
func (a *app) runJournal(ctx context.Context, fleet *restore.LocalFleet, jf restore.FileJournal, j *restore.Journal) error {
	start := a.now()
	r := &restore.Runner{Fleet: fleet, Journal: jf, Prefix: a.cfg.Prefix, Now: a.now, Log: a.logger(), AfterStep: func(s restore.Step) error {
		if n := len(j.History); n > 0 {
			fmt.Fprintf(a.stdout, "  %s\n", j.History[n-1])
		}
		return nil
	}}
	if err := r.Run(ctx, j); err != nil {
		if errors.Is(err, restore.ErrStillServing) {
			return withCode(ExitRefused, err)
		}
		return err
	}
	fmt.Fprintf(a.stdout, "%s: done in %s: cluster %x, voters %s%s; the members stop now, for their agents to serve them (start nico-agent on each)\n",
		j.ID, a.now().Sub(start).Round(time.Millisecond), j.NewClusterID, votersOf(ctx, fleet, j), standbysNote(j))
	return nil
}

// liveClient is a client of the cluster at --endpoints when it answers
// within --timeout, nil otherwise.
func (a *app) liveClient(ctx context.Context) *clientv3.Client {
	tlsCfg, err := etcdclient.Files{CA: a.cfg.TLS.CAFile, Cert: a.cfg.TLS.CertFile, Key: a.cfg.TLS.KeyFile}.Load(a.cfg.Endpoints)
	if err != nil || len(a.cfg.Endpoints) == 0 {
		return nil
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: a.cfg.Endpoints, DialTimeout: a.cfg.Timeout, TLS: tlsCfg})
	if err != nil {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	if err := store.Answers(pctx, cli); err != nil {
		cli.Close()
		fmt.Fprintf(a.stderr, "nicoctl: the cluster at %v does not answer (%v): checking the snapshot and the fleet file only\n", a.cfg.Endpoints, err)
		return nil
	}
	return cli
}

// logger is where the restore's steps are logged: stderr, warnings up.
func (a *app) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
