package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// snapshotCmd is `nicoctl snapshot save|list|verify`.
func (a *app) snapshotCmd() *cobra.Command {
	return group("snapshot", "etcd snapshots: take one now, list them, verify one by restoring it into a throwaway member",
		"snapshot: save, list or verify", a.snapshotSaveCmd(), a.snapshotListCmd(), a.snapshotVerifyCmd())
}

// destinationHelp is the help of --to and --from.
const destinationHelp = "snapshot store: a directory, file:///PATH or s3://HOST[:PORT]/BUCKET[/PREFIX][?tls=false] (keys from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); default: the EtcdCluster's spec.snapshots.destination"

// snapshotStoreOf opens dest, or the EtcdCluster's spec.snapshots.destination
// when dest is empty (c may be nil only when dest is set).
func snapshotStoreOf(ctx context.Context, c *cluster, dest, flag string) (snapshot.Store, error) {
	if dest == "" {
		ec := &api.EtcdCluster{}
		if err := c.st.Get(ctx, store.EtcdClusterKey, ec); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("reading the EtcdCluster: %w", err)
		}
		dest = ec.Spec.Snapshots.Destination
		if dest == "" {
			return nil, withCode(ExitUsage, fmt.Errorf("no snapshot store: the EtcdCluster has no spec.snapshots.destination; pass %s (%s) or set it with 'nicoctl apply -f'", flag, api.AcceptedSnapshotDestinations))
		}
	}
	st, err := snapshot.Open(dest, nil)
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("%s: %w", flag, err))
	}
	return st, nil
}

func (a *app) snapshotSaveCmd() *cobra.Command {
	var to, tmp string
	var within time.Duration
	c := &cobra.Command{
		Use:   "save",
		Short: "Take an etcd snapshot now from a healthy voter, check it and store it; prints where it went",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			if within <= 0 {
				return withCode(ExitUsage, fmt.Errorf("--within %s is not accepted; use a positive duration such as 10m", within))
			}
			cctx, cancel := context.WithTimeout(cmd.Context(), a.cfg.Timeout)
			c, err := a.connect(cctx)
			cancel()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), within)
			defer cancel()
			st, err := snapshotStoreOf(ctx, c, to, "--to")
			if err != nil {
				return err
			}
			ms, err := c.admin.Statuses(ctx)
			if err != nil {
				return fmt.Errorf("reading members: %w", err)
			}
			src, err := snapshot.PickSource(ms)
			if err != nil {
				return err
			}
			var dbSize int64
			for _, m := range ms {
				if m.ID == src.ID {
					dbSize = m.DBSize
				}
			}
			fmt.Fprintf(a.stderr, "taking a snapshot from %s (%s) into %s\n", src.Name, src.ClientURL, st.Where())
			p := newSaveProgress(a.stderr, isTerminal(a.stderr), dbSize)
			m, err := snapshot.Save(ctx, src, etcdclient.TLSOf(c.cli), st, snapshot.TakeOptions{Dir: tmp, Reason: snapshot.ReasonOnDemand, Progress: p.add})
			p.close()
			if err != nil {
				return err
			}
			if m.Unsynced != "" {
				fmt.Fprintf(a.stderr, "warning: %s: %s\n", src.Name, m.Unsynced)
			}
			return a.emit(snapshotView(m, st.Where()), func(w io.Writer) {
				fmt.Fprintf(w, "snapshot %s stored in %s\n", m.Name, st.Where())
				fmt.Fprintf(w, "revision %d, %d keys, %s, sha256 %s, from %s of cluster %s\n", m.Revision, m.TotalKeys, bytesCell(m.Size), m.SHA256, m.MemberName, m.ClusterID)
			})
		}),
	}
	c.Flags().StringVar(&to, "to", "", destinationHelp)
	c.Flags().StringVar(&tmp, "tmp-dir", "", "local directory that holds the snapshot until it is stored (default: the system's temporary directory)")
	c.Flags().DurationVar(&within, "within", 10*time.Minute, "how long the snapshot, its check and its upload may take")
	return c
}

// saveProgress shows a snapshot's stream: a byte bar on a terminal (the
// member's database size as its estimate), nothing otherwise (the result
// line says it all).
type saveProgress struct {
	bar *progressbar.ProgressBar
}

func newSaveProgress(w io.Writer, tty bool, estimate int64) *saveProgress {
	if !tty {
		return &saveProgress{}
	}
	return &saveProgress{bar: progressbar.NewOptions64(max(estimate, 1),
		progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(30), progressbar.OptionShowBytes(true),
		progressbar.OptionSetDescription("snapshot"), progressbar.OptionClearOnFinish())}
}

func (p *saveProgress) add(received int64) {
	if p.bar == nil {
		return
	}
	if received > p.bar.GetMax64() {
		p.bar.ChangeMax64(received)
	}
	_ = p.bar.Set64(received)
}

func (p *saveProgress) close() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// snapshotRow is one snapshot as list and save print it.
type snapshotRow struct {
	snapshot.Meta
	Where string `json:"where"`
}

func snapshotView(m snapshot.Meta, where string) snapshotRow {
	return snapshotRow{Meta: m, Where: where}
}

func (a *app) snapshotListCmd() *cobra.Command {
	var from string
	c := &cobra.Command{
		Use:   "list",
		Short: "List the stored etcd snapshots, newest first, with age, size, revision and where",
		Long: "List the stored etcd snapshots, newest first, with age, size, revision, keys, the member and\n" +
			"cluster they were taken from, why, and where. With --from it reads the store only and needs\n" +
			"no running cluster (to pick a snapshot to restore).",
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.withStore(cmd.Context(), from, "--from", func(ctx context.Context, _ *cluster, st snapshot.Store) error {
				ms, err := st.List(ctx)
				if err != nil {
					return err
				}
				rows := make([]snapshotRow, len(ms))
				for i, m := range ms {
					rows[i] = snapshotView(m, st.Where())
				}
				now := a.now()
				return a.emit(rows, func(w io.Writer) {
					row(w, "NAME", "AGE", "SIZE", "REVISION", "KEYS", "MEMBER", "CLUSTER", "REASON", "WHERE")
					for _, r := range rows {
						row(w, r.Name, age(now, r.TakenAt), bytesCell(r.Size), r.Revision, r.TotalKeys, r.MemberName, r.ClusterID, oneLine(r.Reason), r.Where)
					}
				})
			})
		}),
	}
	c.Flags().StringVar(&from, "from", "", destinationHelp)
	return c
}

// withStore runs fn with the store from (then with no cluster connection
// unless connect is needed for the spec's destination).
func (a *app) withStore(ctx context.Context, from, flag string, fn func(ctx context.Context, c *cluster, st snapshot.Store) error) error {
	if from != "" {
		st, err := snapshotStoreOf(ctx, nil, from, flag)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, max(a.cfg.Timeout, time.Minute))
		defer cancel()
		return fn(ctx, nil, st)
	}
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		st, err := snapshotStoreOf(ctx, c, "", flag)
		if err != nil {
			return err
		}
		return fn(ctx, c, st)
	})
}
