package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

// verifyView is what verify prints.
type verifyView struct {
	Snapshot string       `json:"snapshot"`
	Where    string       `json:"where,omitempty"`
	Cluster  api.MemberID `json:"cluster,omitempty"`
	Keys     int64        `json:"keys"`
	Revision int64        `json:"revision"`
	SHA256   string       `json:"sha256"`
	Took     api.Duration `json:"took"`
	Recorded bool         `json:"recorded"`
}

func (a *app) snapshotVerifyCmd() *cobra.Command {
	var from, tmp string
	var anyCluster bool
	var within time.Duration
	c := &cobra.Command{
		Use:   "verify SNAPSHOT",
		Short: "Restore drill: restore a snapshot into a throwaway member and report its keys and revision",
		Long: "Restore drill: fetch the snapshot (a name from 'nicoctl snapshot list', or a local file),\n" +
			"check its sha256 and, against the cluster nicoctl reaches, its cluster ID (that cluster's, or\n" +
			"one its fleet ran before a restore: the ClusterLineage), restore it into a\n" +
			"temporary data dir, start a throwaway etcd member on 127.0.0.1 and count the keys and read the\n" +
			"revision it serves. The EtcdCluster's status.snapshots.lastVerified records the outcome (the\n" +
			"coordinator's leader writes it). A truncated or altered snapshot, or one of another cluster, is\n" +
			"refused (exit 3) and nothing is recorded. With --from, or for a local file, no cluster is\n" +
			"needed and nothing is recorded.",
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			arg := args[0]
			ctx, cancel := context.WithTimeout(cmd.Context(), within)
			defer cancel()
			opts := snapshot.VerifyOptions{Dir: tmp}
			if fi, err := os.Stat(arg); err == nil && !fi.IsDir() && (strings.Contains(arg, "/") || strings.HasSuffix(arg, ".db")) {
				res, err := snapshot.Verify(ctx, arg, opts)
				if err != nil {
					return verifyRefusal(err)
				}
				return a.printVerify(verifyView{Snapshot: arg, Keys: res.Keys, Revision: res.Revision, SHA256: res.Status.SHA256, Took: api.Duration(res.Took)})
			}
			if err := snapshot.ValidName(arg); err != nil {
				return withCode(ExitUsage, fmt.Errorf("%w (or the path of a snapshot file)", err))
			}
			return a.withStore(ctx, from, "--from", func(_ context.Context, c *cluster, st snapshot.Store) error {
				if c != nil && !anyCluster {
					opts.ExpectCluster = c.clusterID
					lin := &api.ClusterLineage{}
					if err := c.st.Get(ctx, store.ClusterLineageKey, lin); err != nil && !errors.Is(err, store.ErrNotFound) {
						return fmt.Errorf("reading the cluster's lineage: %w", err)
					}
					opts.EarlierClusters = lin.IDs()
				}
				m, res, err := snapshot.VerifyStored(ctx, st, arg, opts)
				if errors.Is(err, snapshot.ErrOtherCluster) {
					err = fmt.Errorf("%w (--any-cluster drills it anyway)", err)
				}
				if err != nil && refused(err) {
					return verifyRefusal(err)
				}
				v := verifyView{Snapshot: m.Name, Where: st.Where(), Cluster: m.ClusterID, Keys: res.Keys, Revision: res.Revision, SHA256: m.SHA256, Took: api.Duration(res.Took)}
				if c != nil {
					rep := api.SnapshotVerification{Name: m.Name, Where: st.Where(), VerifiedAt: a.now().UTC(), OK: err == nil,
						Keys: res.Keys, Revision: res.Revision, Took: api.Duration(res.Took), By: "nicoctl"}
					if err != nil {
						rep.Message = err.Error()
					}
					wctx, wcancel := context.WithTimeout(cmd.Context(), a.cfg.Timeout)
					defer wcancel()
					if perr := c.st.Put(wctx, store.SnapshotDrillKey, api.NewSnapshotDrill(rep)); perr != nil {
						return errors.Join(err, fmt.Errorf("recording the drill: %w", perr))
					}
					v.Recorded = true
				}
				if err != nil {
					return err
				}
				return a.printVerify(v)
			})
		}),
	}
	c.Flags().StringVar(&from, "from", "", destinationHelp)
	c.Flags().StringVar(&tmp, "tmp-dir", "", "where the snapshot and the throwaway member's data dir go, removed afterwards (default: the system's temporary directory)")
	c.Flags().BoolVar(&anyCluster, "any-cluster", false, "drill a snapshot of another cluster than the one nicoctl reaches")
	c.Flags().DurationVar(&within, "within", 10*time.Minute, "how long the fetch, the restore and the drill may take")
	return c
}

// refused tells the errors that refuse a snapshot before anything is
// restored.
func refused(err error) bool {
	return errors.Is(err, snapshot.ErrCorrupt) || errors.Is(err, snapshot.ErrOtherCluster) ||
		errors.Is(err, snapshot.ErrNotFound) || errors.Is(err, snapshot.ErrBadName)
}

func verifyRefusal(err error) error {
	switch {
	case errors.Is(err, snapshot.ErrNotFound), errors.Is(err, os.ErrNotExist):
		return withCode(ExitNotFound, err)
	case refused(err):
		return withCode(ExitRefused, fmt.Errorf("refused, nothing restored or recorded: %w", err))
	}
	return err
}

func (a *app) printVerify(v verifyView) error {
	return a.emit(v, func(w io.Writer) {
		fmt.Fprintf(w, "snapshot %s restored into a throwaway member: %d keys at revision %d (in %v)\n", v.Snapshot, v.Keys, v.Revision, time.Duration(v.Took).Round(time.Millisecond))
		if v.Recorded {
			fmt.Fprintln(w, "recorded as the EtcdCluster's last verified restore")
		}
	})
}
