package snapshot

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Taken is a snapshot streamed into a local file and checked; the caller
// puts it in a Store and removes Path.
type Taken struct {
	Path string
	Meta Meta
}

// TakeOptions say what Take records and how it reports progress.
type TakeOptions struct {
	// Dir holds the local file ("": os.TempDir()).
	Dir string
	// Now stamps Meta.TakenAt (nil: time.Now).
	Now func() time.Time
	// Reason, MemberName and Node are copied into the Meta.
	Reason, MemberName, Node string
	// Progress, when set, is called with the bytes received so far.
	Progress func(received int64)
}

// Take streams a snapshot from the member cli talks to (give it a client
// of that one member's endpoint: etcd's snapshot is that member's
// point-in-time state), writes it to a file in opts.Dir and checks it.
// The Meta names the cluster and member from the stream's header.
//
// A follower applies what the cluster committed a moment after the
// leader acknowledged it, so Take first reads through the member
// linearizably: once that read returns, the member has applied every
// write acknowledged before Take was called, and the snapshot holds
// them. A member whose cluster has no quorum cannot answer that read
// within syncTimeout; it is snapshotted as it is, and Meta.Unsynced
// says why.
func Take(ctx context.Context, cli *clientv3.Client, opts TakeOptions) (*Taken, error) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	eps := cli.Endpoints()
	if len(eps) != 1 {
		return nil, fmt.Errorf("snapshot: take: the client has endpoints %v; give it the one member's endpoint to take from", eps)
	}
	// The snapshot stream's header carries no IDs: ask the member.
	sresp, err := cli.Status(ctx, eps[0])
	if err != nil {
		return nil, fmt.Errorf("snapshot: take from %s: status: %w", eps[0], err)
	}
	cluster, member := api.MemberID(sresp.Header.ClusterId), api.MemberID(sresp.Header.MemberId)
	unsynced := syncWith(ctx, cli)
	at := now().UTC()
	resp, err := cli.SnapshotWithVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshot: take from %v: %w", cli.Endpoints(), err)
	}
	defer resp.Snapshot.Close()
	f, err := os.CreateTemp(opts.Dir, "nico-snapshot-*.db.part")
	if err != nil {
		return nil, fmt.Errorf("snapshot: take: %w", err)
	}
	path := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(path)
		}
	}()
	var w io.Writer = f
	if opts.Progress != nil {
		w = &progressWriter{w: f, fn: opts.Progress}
	}
	if _, err := io.Copy(w, resp.Snapshot); err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot: take from %v: stream: %w", cli.Endpoints(), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot: take: sync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("snapshot: take: close %s: %w", path, err)
	}
	st, err := Check(path)
	if err != nil {
		return nil, fmt.Errorf("snapshot: take from %v: %w", cli.Endpoints(), err)
	}
	// The member's own version: the stream's first message carries the
	// storage version instead, which a member leaves unset until its
	// cluster version is decided (a snapshot right after start has none).
	version := sresp.Version
	if version == "" {
		version = resp.Version
	}
	ok = true
	return &Taken{Path: path, Meta: Meta{
		Name:        NameFor(cluster, at, st.Revision),
		ClusterID:   cluster,
		MemberID:    member,
		MemberName:  opts.MemberName,
		Node:        opts.Node,
		EtcdVersion: version,
		TakenAt:     at,
		Reason:      opts.Reason,
		Unsynced:    unsynced,
		Status:      st,
	}}, nil
}

// syncTimeout bounds the linearizable read that brings the member up to
// the cluster's acknowledged writes before a snapshot.
const syncTimeout = 5 * time.Second

// syncWith waits until the member cli talks to has applied every write
// its cluster acknowledged (a linearizable read through it: etcd answers
// it once the member's applied index reaches the leader's commit index).
// It returns "" then, or why the member could not be brought up to date.
func syncWith(ctx context.Context, cli *clientv3.Client) string {
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if _, err := store.CurrentRevision(sctx, cli, syncKey); err != nil {
		return fmt.Sprintf("a linearizable read through the member failed (%v): the snapshot may miss the cluster's last acknowledged writes", err)
	}
	return ""
}

// syncKey is the key syncWith reads; any key serves, none need exist.
const syncKey = "\x00nico-snapshot-sync"

// progressWriter reports the running byte count after each write.
type progressWriter struct {
	w  io.Writer
	n  int64
	fn func(int64)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	p.fn(p.n)
	return n, err
}
