package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/restore"
	"github.com/homystack/nico/pkg/snapshot"
	"github.com/homystack/nico/pkg/store"
	"github.com/schollz/progressbar/v3"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// restoreSource is the snapshot file a restore reads: the --from file, or
// the snapshot --from or --latest named, fetched from the store.
type restoreSource struct {
	path string
	// meta, name and where are set for a fetched snapshot.
	meta  snapshot.Meta
	name  string
	where string
}

// isSnapshotFile tells whether a --from or verify argument is a file
// path rather than a snapshot name: it names a file that exists, or it
// has a slash or a .db suffix (which no snapshot name has).
func isSnapshotFile(arg string) bool {
	if fi, err := os.Stat(arg); err == nil && !fi.IsDir() {
		return true
	}
	return strings.Contains(arg, "/") || strings.HasSuffix(arg, ".db")
}

// sameSource tells whether an unfinished journal restores what --from or
// --latest names, so that running the command again resumes it.
func (o restoreOpts) sameSource(j *restore.Journal) bool {
	if o.latest {
		return j.Snapshot.Name != ""
	}
	return j.Snapshot.Path == o.from || (j.Snapshot.Name != "" && j.Snapshot.Name == o.from)
}

// fetchedPath is where a snapshot fetched for the journal at journal is
// kept until the restore is done: beside the journal, so that a resumed
// restore reads the same file.
func fetchedPath(journal, name string) string {
	return filepath.Join(filepath.Dir(journal), "nico-restore-"+name+".db")
}

// resolveSource turns --from or --latest into a local snapshot file,
// fetching a named snapshot from the store (--store, else the live
// cluster's spec.snapshots.destination) and checking its size and sha256
// against its metadata. Nothing is stopped yet: a refusal changes nothing.
func (a *app) resolveSource(ctx context.Context, o restoreOpts, live *clientv3.Client) (restoreSource, error) {
	if !o.latest && isSnapshotFile(o.from) {
		return restoreSource{path: o.from}, nil
	}
	if !o.latest {
		if err := snapshot.ValidName(o.from); err != nil {
			return restoreSource{}, withCode(ExitUsage, fmt.Errorf("--from: %w (or the path of a snapshot file)", err))
		}
	}
	st, err := a.restoreStore(ctx, o.store, live)
	if err != nil {
		return restoreSource{}, err
	}
	name := o.from
	if o.latest {
		ms, err := st.List(ctx)
		if err != nil {
			return restoreSource{}, fmt.Errorf("listing the snapshots in %s: %w", st.Where(), err)
		}
		if len(ms) == 0 {
			return restoreSource{}, withCode(ExitNotFound, fmt.Errorf("--latest: the store %s holds no snapshot; take one with 'nicoctl snapshot save' or name a file with --from", st.Where()))
		}
		name = ms[0].Name
	}
	dst := fetchedPath(o.journal, name)
	fmt.Fprintf(a.stderr, "fetching snapshot %s from %s\n", name, st.Where())
	p := &fetchProgress{w: a.stderr, tty: isTerminal(a.stderr)}
	tmp, m, err := snapshot.FetchWith(ctx, st, name, snapshot.FetchOptions{Dir: filepath.Dir(dst), Progress: p.add})
	p.close()
	switch {
	case errors.Is(err, snapshot.ErrNotFound):
		return restoreSource{}, withCode(ExitNotFound, fmt.Errorf("--from %q: %w; list the names with 'nicoctl snapshot list --from %s'", name, err, st.Where()))
	case errors.Is(err, snapshot.ErrCorrupt):
		return restoreSource{}, withCode(ExitRefused, fmt.Errorf("refused, nothing stopped: %w", err))
	case err != nil:
		return restoreSource{}, err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return restoreSource{}, fmt.Errorf("keeping the fetched snapshot beside the journal: %w", err)
	}
	return restoreSource{path: dst, meta: m, name: name, where: st.Where()}, nil
}

// restoreStore opens --store, or the snapshot store the live cluster's
// EtcdCluster names.
func (a *app) restoreStore(ctx context.Context, dest string, live *clientv3.Client) (snapshot.Store, error) {
	if dest == "" && live != nil {
		kv, _, err := store.GetUnder(ctx, live, a.cfg.Prefix, store.EtcdClusterKey)
		if err != nil {
			return nil, fmt.Errorf("reading the EtcdCluster: %w", err)
		}
		if kv != nil {
			var ec api.EtcdCluster
			if err := json.Unmarshal(kv.Value, &ec); err != nil {
				return nil, fmt.Errorf("decoding the EtcdCluster: %w", err)
			}
			dest = ec.Spec.Snapshots.Destination
		}
	}
	if dest == "" {
		return nil, withCode(ExitUsage, fmt.Errorf("a snapshot name needs its store: pass --store (%s), or let nicoctl reach a cluster (--endpoints) whose EtcdCluster sets spec.snapshots.destination", api.AcceptedSnapshotDestinations))
	}
	st, err := snapshot.Open(dest, nil)
	if err != nil {
		return nil, withCode(ExitUsage, fmt.Errorf("--store: %w", err))
	}
	return st, nil
}

// fetchProgress shows a snapshot's download: a byte bar on a terminal; on
// other output, for a snapshot of 64 MiB or more, a line at each quarter.
type fetchProgress struct {
	w    io.Writer
	tty  bool
	bar  *progressbar.ProgressBar
	last int64 // quarters reported
}

// largeFetch is the size from which a non-terminal output gets progress
// lines.
const largeFetch = 64 << 20

func (p *fetchProgress) add(received, total int64) {
	if p.tty {
		if p.bar == nil {
			p.bar = progressbar.NewOptions64(max(total, 1), progressbar.OptionSetWriter(p.w), progressbar.OptionSetWidth(30),
				progressbar.OptionShowBytes(true), progressbar.OptionSetDescription("fetch"), progressbar.OptionClearOnFinish())
		}
		_ = p.bar.Set64(min(received, p.bar.GetMax64()))
		return
	}
	if total < largeFetch {
		return
	}
	if q := received * 4 / total; q > p.last && q <= 4 {
		p.last = q
		fmt.Fprintf(p.w, "fetched %s of %s (%d%%)\n", bytesCell(received), bytesCell(total), q*25)
	}
}

func (p *fetchProgress) close() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// describe names the source as the restore's first line does.
func (s restoreSource) describe() string {
	if s.name == "" {
		return s.path
	}
	return fmt.Sprintf("%s (from %s, taken %s from cluster %s)", s.name, s.where, s.meta.TakenAt.UTC().Format("2006-01-02T15:04:05Z"), s.meta.ClusterID)
}

// prepareRestore resolves o's snapshot (asking the old cluster, when it
// still answers, for what --from NAME or --latest needs) and prepares the
// restore of it onto o.target with members (restore.Prepare, which also
// reserves the live cluster's slot). A fetched copy is removed when the
// preparation fails.
func (a *app) prepareRestore(ctx context.Context, o restoreOpts, members []string, now time.Time) (*restore.Journal, restoreSource, error) {
	live := a.liveClient(ctx)
	if live != nil {
		defer live.Close()
	}
	src, err := a.resolveSource(ctx, o, live)
	if err != nil {
		return nil, src, err
	}
	j, err := restore.Prepare(ctx, restore.Request{Snapshot: src.path, SnapshotCluster: src.meta.ClusterID, Target: o.target, Members: members, Live: live, Prefix: a.cfg.Prefix, BumpRevision: o.bump, Now: now, Again: o.again})
	if err != nil {
		if src.name != "" {
			os.Remove(src.path)
		}
		return nil, src, withCode(ExitRefused, err)
	}
	j.Snapshot.Name, j.Snapshot.Where = src.name, src.where
	return j, src, nil
}
