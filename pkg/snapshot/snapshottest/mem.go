// Package snapshottest holds an in-memory snapshot.Store for tests of the
// store's users, one that fails on demand, and a real SeaweedFS S3 server
// (StartWeed) for the S3 store's tests.
package snapshottest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/homystack/nico/pkg/snapshot"
)

// Mem is an in-memory snapshot.Store; the zero value is not usable: use
// NewMem.
type Mem struct {
	mu    sync.Mutex
	data  map[string][]byte
	metas map[string]snapshot.Meta
	// Fail, when set, is returned by every call until cleared.
	fail error
}

// NewMem returns an empty store.
func NewMem() *Mem {
	return &Mem{data: map[string][]byte{}, metas: map[string]snapshot.Meta{}}
}

// FailWith makes every later call return err (nil: succeed again).
func (m *Mem) FailWith(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fail = err
}

// Where implements snapshot.Store.
func (m *Mem) Where() string { return "mem://" }

// Put implements snapshot.Store.
func (m *Mem) Put(ctx context.Context, meta snapshot.Meta, r io.Reader) error {
	if err := snapshot.ValidName(meta.Name); err != nil {
		return err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	if meta.Size != 0 && int64(len(b)) != meta.Size {
		return fmt.Errorf("snapshottest: %s: got %d bytes, the snapshot is %d", meta.Name, len(b), meta.Size)
	}
	m.data[meta.Name], m.metas[meta.Name] = b, meta
	return nil
}

// Get implements snapshot.Store.
func (m *Mem) Get(ctx context.Context, name string) (io.ReadCloser, snapshot.Meta, error) {
	if err := snapshot.ValidName(name); err != nil {
		return nil, snapshot.Meta{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, snapshot.Meta{}, m.fail
	}
	meta, ok := m.metas[name]
	if !ok {
		return nil, snapshot.Meta{}, fmt.Errorf("%w: %s in mem://", snapshot.ErrNotFound, name)
	}
	return io.NopCloser(bytes.NewReader(m.data[name])), meta, nil
}

// List implements snapshot.Store.
func (m *Mem) List(ctx context.Context) ([]snapshot.Meta, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return nil, m.fail
	}
	out := make([]snapshot.Meta, 0, len(m.metas))
	for _, meta := range m.metas {
		out = append(out, meta)
	}
	snapshot.SortNewest(out)
	return out, nil
}

// Delete implements snapshot.Store.
func (m *Mem) Delete(ctx context.Context, name string) error {
	if err := snapshot.ValidName(name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail != nil {
		return m.fail
	}
	delete(m.metas, name)
	delete(m.data, name)
	return nil
}
