package snapshot

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	etcdutl "go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// VerifyOptions bound a restore drill.
type VerifyOptions struct {
	// Dir is where the throwaway member's data dir is made ("":
	// os.TempDir()); it is removed afterwards.
	Dir string
	// ExpectCluster, when set, refuses a snapshot whose Meta names
	// another cluster (ErrOtherCluster) before anything is restored.
	ExpectCluster api.MemberID
	// EarlierClusters are also accepted: the clusters the expected
	// one's fleet ran before a restore (api.ClusterLineage).
	EarlierClusters []api.MemberID
	// Timeout bounds the member's start (0: 1 minute).
	Timeout time.Duration
}

// VerifyResult is what a restore drill found.
type VerifyResult struct {
	// Status is what Check read from the file.
	Status Status
	// Keys and Revision are what the restored member served.
	Keys     int64
	Revision int64
	// Took is the drill's duration, restore and start included.
	Took time.Duration
}

// Verify checks the snapshot file at path, restores it into a throwaway
// single-member cluster (a temporary data dir, etcd's restore, an
// embedded etcd on 127.0.0.1 ports, its authentication turned off), and
// counts the keys and reads the revision the member serves; they must match the file's (ErrMismatch).
// A file that fails Check is refused (ErrCorrupt) before anything is
// restored. Nothing outside the temporary dir is touched.
func Verify(ctx context.Context, path string, opts VerifyOptions) (VerifyResult, error) {
	start := time.Now()
	st, err := Check(path)
	if err != nil {
		return VerifyResult{}, err
	}
	tmp, err := os.MkdirTemp(opts.Dir, "nico-verify-*")
	if err != nil {
		return VerifyResult{}, fmt.Errorf("snapshot: verify: %w", err)
	}
	defer os.RemoveAll(tmp)
	peer, client, err := loopbackURLs()
	if err != nil {
		return VerifyResult{}, err
	}
	dataDir := filepath.Join(tmp, "data")
	const name = "nico-verify"
	if err := etcdutl.NewV3(zap.NewNop()).Restore(etcdutl.RestoreConfig{
		SnapshotPath:        path,
		Name:                name,
		OutputDataDir:       dataDir,
		PeerURLs:            []string{peer.String()},
		InitialCluster:      name + "=" + peer.String(),
		InitialClusterToken: name,
	}); err != nil {
		return VerifyResult{}, fmt.Errorf("snapshot: verify %s: restore: %w", path, err)
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dataDir
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
	cfg.InitialCluster = name + "=" + peer.String()
	cfg.InitialClusterToken = name
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.ListenMetricsUrls = nil
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("snapshot: verify %s: start throwaway member: %w", path, err)
	}
	defer e.Close()
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return VerifyResult{}, fmt.Errorf("snapshot: verify %s: throwaway member: %w", path, err)
	case <-time.After(timeout):
		return VerifyResult{}, fmt.Errorf("snapshot: verify %s: throwaway member not ready after %v", path, timeout)
	case <-ctx.Done():
		return VerifyResult{}, ctx.Err()
	}
	// The restored auth store is the snapshot's: a fleet's etcd runs with
	// authentication on, and this member knows no password or certificate
	// of its users. Authentication is turned off in the throwaway member's
	// own store (its data dir is removed afterwards); the keys and the
	// revision it serves are unchanged by it.
	e.Server.AuthStore().AuthDisable()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client.String()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return VerifyResult{}, fmt.Errorf("snapshot: verify %s: client: %w", path, err)
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	count, rev, err := store.CountAll(cctx, cli)
	if err != nil {
		return VerifyResult{}, fmt.Errorf("snapshot: verify %s: %w", path, err)
	}
	res := VerifyResult{Status: st, Keys: count, Revision: rev, Took: time.Since(start)}
	keys := int64(st.TotalKeys)
	marked, err := bumpMarked(path)
	if err != nil {
		return res, err
	}
	if marked {
		// etcd's status counts the restore's revision marker as a key.
		keys--
	}
	// An empty database holds revision 0; a member serves at least 1.
	if res.Keys != keys || res.Revision != max(st.Revision, 1) {
		return res, fmt.Errorf("%w: %s: the restored member serves %d keys at revision %d, the file holds %d at revision %d", ErrMismatch, path, res.Keys, res.Revision, keys, st.Revision)
	}
	return res, nil
}

// VerifyStored fetches the snapshot name from st into opts.Dir, checks its
// sha256 against its Meta and its cluster against opts.ExpectCluster, and
// runs Verify on it.
func VerifyStored(ctx context.Context, st Store, name string, opts VerifyOptions) (Meta, VerifyResult, error) {
	path, m, err := Fetch(ctx, st, name, opts.Dir)
	if err != nil {
		return m, VerifyResult{}, err
	}
	defer os.Remove(path)
	if err := m.CheckCluster(opts.ExpectCluster, opts.EarlierClusters...); err != nil {
		return m, VerifyResult{}, err
	}
	res, err := Verify(ctx, path, opts)
	return m, res, err
}

// Fetch copies the snapshot name from st into a file in dir ("":
// os.TempDir()) and checks that its sha256 and size are the ones its Meta
// records; the caller removes the file.
func Fetch(ctx context.Context, st Store, name, dir string) (string, Meta, error) {
	return FetchWith(ctx, st, name, FetchOptions{Dir: dir})
}

// FetchOptions tune FetchWith.
type FetchOptions struct {
	// Dir is where the file is made ("": os.TempDir()).
	Dir string
	// Progress, when set, is called as the snapshot arrives with the
	// bytes received so far and the size its Meta records.
	Progress func(received, total int64)
}

// FetchWith is Fetch with options: the file goes to opts.Dir and
// opts.Progress follows the download.
func FetchWith(ctx context.Context, st Store, name string, opts FetchOptions) (string, Meta, error) {
	r, m, err := st.Get(ctx, name)
	if err != nil {
		return "", Meta{}, err
	}
	defer r.Close()
	f, err := os.CreateTemp(opts.Dir, "nico-fetch-*.db")
	if err != nil {
		return "", m, fmt.Errorf("snapshot: fetch: %w", err)
	}
	var w io.Writer = f
	if opts.Progress != nil {
		w = &progressWriter{w: f, fn: func(n int64) { opts.Progress(n, m.Size) }}
	}
	n, err := io.Copy(w, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", m, fmt.Errorf("snapshot: fetch %s from %s: %w", name, st.Where(), err)
	}
	// The size and the database's sha256 must be the ones the Meta
	// records, so a cut or swapped object is refused before any restore.
	if n != m.Size {
		os.Remove(f.Name())
		return "", m, fmt.Errorf("%w: %s in %s: %d bytes, its metadata says %d: truncated", ErrCorrupt, name, st.Where(), n, m.Size)
	}
	got, err := Check(f.Name())
	if err != nil {
		os.Remove(f.Name())
		return "", m, fmt.Errorf("snapshot: fetch %s from %s: %w", name, st.Where(), err)
	}
	if got.SHA256 != m.SHA256 {
		os.Remove(f.Name())
		return "", m, fmt.Errorf("%w: %s in %s: database sha256 %s, its metadata says %s", ErrCorrupt, name, st.Where(), got.SHA256, m.SHA256)
	}
	return f.Name(), m, nil
}

// loopbackURLs returns a peer and a client URL on 127.0.0.1 ports that
// were free a moment ago.
func loopbackURLs() (peer, client url.URL, err error) {
	var ports [2]int
	for i := range ports {
		l, lerr := net.Listen("tcp", "127.0.0.1:0")
		if lerr != nil {
			return peer, client, fmt.Errorf("snapshot: verify: free port: %w", lerr)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	peer = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	client = url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[1])}
	return peer, client, nil
}
