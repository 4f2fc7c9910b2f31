package snapshot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// DirStore keeps snapshots as files in a directory, name.db beside
// name.json: a mounted share (NFS, SMB) puts them off the node. Files are
// written under a temporary name and renamed, so a reader never sees half
// of one.
type DirStore struct {
	dir string
}

// NewDirStore returns the store in dir, creating dir if needed.
func NewDirStore(dir string) (*DirStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot: dir store: %w", err)
	}
	return &DirStore{dir: dir}, nil
}

// Where implements Store.
func (d *DirStore) Where() string { return d.dir }

// Put implements Store.
func (d *DirStore) Put(ctx context.Context, m Meta, r io.Reader) error {
	if err := ValidName(m.Name); err != nil {
		return err
	}
	n, err := d.writeFile(m.Name+".db", r)
	if err != nil {
		return err
	}
	if m.Size != 0 && n != m.Size {
		os.Remove(filepath.Join(d.dir, m.Name+".db"))
		return fmt.Errorf("snapshot: dir store: %s: wrote %d bytes, the snapshot is %d", m.Name, n, m.Size)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("snapshot: dir store: %w", err)
	}
	if _, err := d.writeFile(m.Name+".json", strings.NewReader(string(b)+"\n")); err != nil {
		return err
	}
	return ctx.Err()
}

func (d *DirStore) writeFile(name string, r io.Reader) (int64, error) {
	f, err := os.CreateTemp(d.dir, "."+name+".*.part")
	if err != nil {
		return 0, fmt.Errorf("snapshot: dir store: %w", err)
	}
	tmp := f.Name()
	n, err := io.Copy(f, r)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(d.dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return n, fmt.Errorf("snapshot: dir store: write %s: %w", name, err)
	}
	return n, nil
}

// Get implements Store.
func (d *DirStore) Get(ctx context.Context, name string) (io.ReadCloser, Meta, error) {
	if err := ValidName(name); err != nil {
		return nil, Meta{}, err
	}
	m, err := d.meta(name + ".json")
	if err != nil {
		return nil, Meta{}, err
	}
	f, err := os.Open(filepath.Join(d.dir, name+".db"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Meta{}, fmt.Errorf("%w: %s in %s", ErrNotFound, name, d.dir)
	}
	if err != nil {
		return nil, Meta{}, fmt.Errorf("snapshot: dir store: %w", err)
	}
	return f, m, nil
}

func (d *DirStore) meta(file string) (Meta, error) {
	b, err := os.ReadFile(filepath.Join(d.dir, file))
	if errors.Is(err, fs.ErrNotExist) {
		return Meta{}, fmt.Errorf("%w: %s in %s", ErrNotFound, strings.TrimSuffix(file, ".json"), d.dir)
	}
	if err != nil {
		return Meta{}, fmt.Errorf("snapshot: dir store: %w", err)
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return Meta{}, fmt.Errorf("snapshot: dir store: %s: %w", file, err)
	}
	return m, nil
}

// List implements Store.
func (d *DirStore) List(ctx context.Context) ([]Meta, error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, fmt.Errorf("snapshot: dir store: %w", err)
	}
	var out []Meta
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() || ValidName(name) != nil {
			continue
		}
		m, err := d.meta(e.Name())
		if errors.Is(err, ErrNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	SortNewest(out)
	return out, ctx.Err()
}

// Delete implements Store: the Meta goes first, so a half-deleted
// snapshot is no longer listed.
func (d *DirStore) Delete(ctx context.Context, name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	for _, f := range []string{name + ".json", name + ".db"} {
		if err := os.Remove(filepath.Join(d.dir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("snapshot: dir store: %w", err)
		}
	}
	return ctx.Err()
}
