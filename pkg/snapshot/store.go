package snapshot

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/homystack/nico/pkg/api"
)

// Store keeps snapshots and their Meta off the node they were taken on.
// Implementations: DirStore (a directory, e.g. a mounted share), S3Store
// (an S3-compatible bucket) and snapshottest.Mem; all pass the same
// contract tests (storetest).
type Store interface {
	// Put stores the snapshot read from r (m.Size bytes) under m.Name and
	// then its Meta; a snapshot whose Meta is absent is not listed.
	Put(ctx context.Context, m Meta, r io.Reader) error
	// Get opens the snapshot named name; ErrNotFound when absent.
	Get(ctx context.Context, name string) (io.ReadCloser, Meta, error)
	// List returns every complete snapshot's Meta, newest first.
	List(ctx context.Context) ([]Meta, error)
	// Delete removes the snapshot and its Meta; deleting an absent one
	// is no error.
	Delete(ctx context.Context, name string) error
	// Where is the store's location as the user wrote it (a path or a
	// URL without credentials), for listings.
	Where() string
}

// S3Credentials are an S3 store's keys; Open takes them from
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY when not given.
type S3Credentials struct {
	AccessKey, SecretKey string
}

// Open returns the store a destination names:
//
//	/mnt/share/etcd or file:///mnt/share/etcd   a directory (DirStore)
//	s3://HOST[:PORT]/BUCKET[/PREFIX][?tls=false] an S3-compatible bucket (S3Store)
//
// creds may be nil (the environment's keys are used for s3).
func Open(dest string, creds *S3Credentials) (Store, error) {
	if err := ValidDestination(dest); err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(dest, "s3://"):
		u, _ := url.Parse(dest)
		c := S3Credentials{AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}
		if creds != nil {
			c = *creds
		}
		bucket, prefix, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		return NewS3Store(S3Config{
			Endpoint: u.Host, Bucket: bucket, Prefix: prefix,
			Insecure: u.Query().Get("tls") == "false", Credentials: c,
		})
	default:
		return NewDirStore(strings.TrimPrefix(dest, "file://"))
	}
}

// ValidDestination returns an error naming dest and what is accepted when
// Open cannot open it (api.SnapshotDestinationProblem).
func ValidDestination(dest string) error {
	if p := api.SnapshotDestinationProblem(dest); p != "" {
		return fmt.Errorf("snapshot: destination %q is not accepted: %s; %s", dest, p, api.AcceptedSnapshotDestinations)
	}
	return nil
}

// SortNewest orders metas newest first (by TakenAt, then name).
func SortNewest(ms []Meta) {
	sort.Slice(ms, func(i, j int) bool {
		if !ms[i].TakenAt.Equal(ms[j].TakenAt) {
			return ms[i].TakenAt.After(ms[j].TakenAt)
		}
		return ms[i].Name > ms[j].Name
	})
}
