// Package storetest is the contract every snapshot.Store passes: the
// directory store, the S3 store and the in-memory fake run the same cases.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/snapshot"
)

// Run runs the contract against the store newStore returns; each case gets
// a fresh, empty store.
func Run(t *testing.T, newStore func(t *testing.T) snapshot.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	meta := func(i int, data []byte) snapshot.Meta {
		return snapshot.Meta{
			Name: fmt.Sprintf("snap-%d", i), ClusterID: 0xc1, MemberID: 0xa, TakenAt: t0.Add(time.Duration(i) * time.Hour),
			Reason: snapshot.ReasonScheduled, Status: snapshot.Status{Size: int64(len(data)), Revision: int64(i), SHA256: "00"},
		}
	}
	t.Run("PutGetRoundTrip", func(t *testing.T) {
		st := newStore(t)
		data := bytes.Repeat([]byte("etcd"), 300)
		m := meta(1, data)
		if err := st.Put(ctx, m, bytes.NewReader(data)); err != nil {
			t.Fatalf("Put: %v", err)
		}
		r, got, err := st.Get(ctx, m.Name)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !bytes.Equal(b, data) {
			t.Fatalf("Get returned %d bytes, want the %d put", len(b), len(data))
		}
		if got.Name != m.Name || got.ClusterID != m.ClusterID || !got.TakenAt.Equal(m.TakenAt) || got.Revision != m.Revision || got.Size != m.Size {
			t.Fatalf("Get meta = %+v, want %+v", got, m)
		}
	})
	t.Run("ListNewestFirst", func(t *testing.T) {
		st := newStore(t)
		for _, i := range []int{2, 1, 3} {
			data := []byte(fmt.Sprint(i))
			if err := st.Put(ctx, meta(i, data), bytes.NewReader(data)); err != nil {
				t.Fatalf("Put %d: %v", i, err)
			}
		}
		ms, err := st.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var names []string
		for _, m := range ms {
			names = append(names, m.Name)
		}
		if fmt.Sprint(names) != "[snap-3 snap-2 snap-1]" {
			t.Fatalf("List = %v, want [snap-3 snap-2 snap-1]", names)
		}
	})
	t.Run("GetAbsentIsNotFound", func(t *testing.T) {
		st := newStore(t)
		if _, _, err := st.Get(ctx, "nothing-here"); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Get of an absent snapshot: %v, want ErrNotFound", err)
		}
	})
	t.Run("DeleteRemovesAndIsIdempotent", func(t *testing.T) {
		st := newStore(t)
		data := []byte("x")
		m := meta(1, data)
		if err := st.Put(ctx, m, bytes.NewReader(data)); err != nil {
			t.Fatalf("Put: %v", err)
		}
		for i := range 2 {
			if err := st.Delete(ctx, m.Name); err != nil {
				t.Fatalf("Delete #%d: %v", i+1, err)
			}
		}
		if _, _, err := st.Get(ctx, m.Name); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
		}
		if ms, err := st.List(ctx); err != nil || len(ms) != 0 {
			t.Fatalf("List after Delete = %v, %v; want none", ms, err)
		}
	})
	t.Run("BadNameRefused", func(t *testing.T) {
		st := newStore(t)
		m := meta(1, []byte("x"))
		m.Name = "../escape"
		if err := st.Put(ctx, m, bytes.NewReader([]byte("x"))); !errors.Is(err, snapshot.ErrBadName) {
			t.Fatalf("Put ../escape: %v, want ErrBadName", err)
		}
	})
	t.Run("ShortBodyRefused", func(t *testing.T) {
		st := newStore(t)
		m := meta(1, []byte("0123456789"))
		if err := st.Put(ctx, m, bytes.NewReader([]byte("01234"))); err == nil {
			t.Fatalf("Put of 5 bytes for a 10-byte snapshot succeeded")
		}
		if ms, err := st.List(ctx); err != nil || len(ms) != 0 {
			t.Fatalf("List after a short Put = %v, %v; want none", ms, err)
		}
	})
	t.Run("Prune", func(t *testing.T) {
		st := newStore(t)
		for i := 1; i <= 4; i++ {
			data := []byte(fmt.Sprint(i))
			if err := st.Put(ctx, meta(i, data), bytes.NewReader(data)); err != nil {
				t.Fatalf("Put %d: %v", i, err)
			}
		}
		gone, err := snapshot.Prune(ctx, st, snapshot.Retention{Keep: 2}, t0.Add(5*time.Hour))
		if err != nil || fmt.Sprint(gone) != "[snap-2 snap-1]" {
			t.Fatalf("Prune = %v, %v; want [snap-2 snap-1]", gone, err)
		}
		ms, err := st.List(ctx)
		if err != nil || len(ms) != 2 || ms[0].Name != "snap-4" {
			t.Fatalf("List after Prune = %v, %v; want snap-4, snap-3", ms, err)
		}
	})
}
