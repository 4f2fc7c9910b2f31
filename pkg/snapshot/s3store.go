package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config locates an S3-compatible bucket.
type S3Config struct {
	// Endpoint is HOST[:PORT] of the S3 API.
	Endpoint string
	// Bucket holds the snapshots; Prefix, when set, is prepended to each
	// object name ("etcd/prod" stores etcd/prod/NAME.db).
	Bucket, Prefix string
	// Insecure speaks plain http (a gateway on loopback or a trusted
	// network); otherwise https.
	Insecure bool
	// Region is the bucket's region ("": us-east-1, which S3-compatible
	// servers accept).
	Region      string
	Credentials S3Credentials
}

// S3Store keeps snapshots as objects NAME.db and NAME.json in a bucket of
// an S3-compatible object store (minio-go client).
type S3Store struct {
	cfg S3Config
	cli *minio.Client
}

// NewS3Store returns the store cfg names; it makes no request.
func NewS3Store(cfg S3Config) (*S3Store, error) {
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	cfg.Prefix = strings.Trim(cfg.Prefix, "/")
	cli, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.Credentials.AccessKey, cfg.Credentials.SecretKey, ""),
		Secure: !cfg.Insecure,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: s3 store %s: %w", cfg.Endpoint, err)
	}
	return &S3Store{cfg: cfg, cli: cli}, nil
}

// Where implements Store: the s3:// URL, without credentials.
func (s *S3Store) Where() string {
	u := "s3://" + s.cfg.Endpoint + "/" + path.Join(s.cfg.Bucket, s.cfg.Prefix)
	if s.cfg.Insecure {
		u += "?tls=false"
	}
	return u
}

// EnsureBucket creates the bucket when it does not exist.
func (s *S3Store) EnsureBucket(ctx context.Context) error {
	ok, err := s.cli.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("snapshot: s3 store %s: bucket %s: %w", s.cfg.Endpoint, s.cfg.Bucket, err)
	}
	if ok {
		return nil
	}
	if err := s.cli.MakeBucket(ctx, s.cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region}); err != nil {
		return fmt.Errorf("snapshot: s3 store %s: make bucket %s: %w", s.cfg.Endpoint, s.cfg.Bucket, err)
	}
	return nil
}

func (s *S3Store) key(file string) string {
	if s.cfg.Prefix == "" {
		return file
	}
	return s.cfg.Prefix + "/" + file
}

// Put implements Store.
func (s *S3Store) Put(ctx context.Context, m Meta, r io.Reader) error {
	if err := ValidName(m.Name); err != nil {
		return err
	}
	size := m.Size
	if size == 0 {
		size = -1
	}
	info, err := s.cli.PutObject(ctx, s.cfg.Bucket, s.key(m.Name+".db"), r, size, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return fmt.Errorf("snapshot: s3 store %s: put %s: %w", s.Where(), m.Name, err)
	}
	if m.Size != 0 && info.Size != m.Size {
		return fmt.Errorf("snapshot: s3 store %s: %s: stored %d bytes, the snapshot is %d", s.Where(), m.Name, info.Size, m.Size)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("snapshot: s3 store: %w", err)
	}
	if _, err := s.cli.PutObject(ctx, s.cfg.Bucket, s.key(m.Name+".json"), bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("snapshot: s3 store %s: put %s.json: %w", s.Where(), m.Name, err)
	}
	return nil
}

func (s *S3Store) meta(ctx context.Context, name string) (Meta, error) {
	obj, err := s.cli.GetObject(ctx, s.cfg.Bucket, s.key(name+".json"), minio.GetObjectOptions{})
	if err != nil {
		return Meta{}, s.wrap(name, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		return Meta{}, s.wrap(name, err)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("snapshot: s3 store %s: %s.json: %w", s.Where(), name, err)
	}
	return m, nil
}

func (s *S3Store) wrap(name string, err error) error {
	switch minio.ToErrorResponse(err).Code {
	case minio.NoSuchKey, "NotFound":
		return fmt.Errorf("%w: %s in %s", ErrNotFound, name, s.Where())
	}
	return fmt.Errorf("snapshot: s3 store %s: %s: %w", s.Where(), name, err)
}

// Get implements Store.
func (s *S3Store) Get(ctx context.Context, name string) (io.ReadCloser, Meta, error) {
	if err := ValidName(name); err != nil {
		return nil, Meta{}, err
	}
	m, err := s.meta(ctx, name)
	if err != nil {
		return nil, Meta{}, err
	}
	obj, err := s.cli.GetObject(ctx, s.cfg.Bucket, s.key(name+".db"), minio.GetObjectOptions{})
	if err == nil {
		_, err = obj.Stat()
	}
	if err != nil {
		if obj != nil {
			obj.Close()
		}
		return nil, Meta{}, s.wrap(name, err)
	}
	return obj, m, nil
}

// List implements Store.
func (s *S3Store) List(ctx context.Context) ([]Meta, error) {
	prefix := ""
	if s.cfg.Prefix != "" {
		prefix = s.cfg.Prefix + "/"
	}
	var out []Meta
	for obj := range s.cli.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if obj.Err != nil {
			return nil, fmt.Errorf("snapshot: s3 store %s: list: %w", s.Where(), obj.Err)
		}
		name, ok := strings.CutSuffix(strings.TrimPrefix(obj.Key, prefix), ".json")
		if !ok || ValidName(name) != nil {
			continue
		}
		m, err := s.meta(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	SortNewest(out)
	return out, nil
}

// Delete implements Store: the Meta goes first.
func (s *S3Store) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	for _, f := range []string{name + ".json", name + ".db"} {
		if err := s.cli.RemoveObject(ctx, s.cfg.Bucket, s.key(f), minio.RemoveObjectOptions{}); err != nil && !errors.Is(s.wrap(name, err), ErrNotFound) {
			return fmt.Errorf("snapshot: s3 store %s: delete %s: %w", s.Where(), f, err)
		}
	}
	return nil
}
