package member_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/member"
)

func TestMarkerRoundTrip(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, ok, err := member.ReadMarker(dir); ok || err != nil {
		t.Fatalf("ReadMarker of empty dir = ok %v, err %v; want false, nil", ok, err)
	}
	want := member.Marker{Name: "cp-1", MemberID: 0x8e9e05c52164694d, ClusterID: 1<<63 + 7,
		WrittenAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	for range 2 { // the second write replaces the first
		if err := member.WriteMarker(dir, want); err != nil {
			t.Fatal(err)
		}
	}
	got, ok, err := member.ReadMarker(dir)
	if err != nil || !ok {
		t.Fatalf("ReadMarker = ok %v, err %v", ok, err)
	}
	if !got.WrittenAt.Equal(want.WrittenAt) || got.Name != want.Name || got.MemberID != want.MemberID || got.ClusterID != want.ClusterID {
		t.Fatalf("ReadMarker = %+v, want %+v", got, want)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != member.MarkerFile {
		t.Fatalf("dir holds %v, want only %s (no temp files)", entries, member.MarkerFile)
	}
}

func TestReadMarkerCorrupt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, member.MarkerFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := member.ReadMarker(dir); err == nil || ok {
		t.Fatalf("ReadMarker of corrupt file = ok %v, err %v; want an error", ok, err)
	}
}

func TestWriteMarkerMissingDir(t *testing.T) {
	t.Parallel()
	if err := member.WriteMarker(filepath.Join(t.TempDir(), "absent"), member.Marker{}); err == nil {
		t.Fatal("WriteMarker into a missing dir succeeded")
	}
}

func TestHasData(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "etcd")
	check := func(want bool) {
		t.Helper()
		got, err := member.HasData(dir)
		if err != nil || got != want {
			t.Fatalf("HasData = %v, %v; want %v, nil", got, err, want)
		}
	}
	check(false) // absent
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	check(false) // empty
	if err := member.WriteMarker(dir, member.Marker{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	check(false) // a marker alone is no member
	if err := os.Mkdir(filepath.Join(dir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	check(true)
}

func TestWipe(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "etcd")
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 0, time.FixedZone("X", 3600))

	backup, err := member.Wipe(dir, t0)
	if err != nil || backup != "" {
		t.Fatalf("Wipe of absent dir = %q, %v; want \"\", nil", backup, err)
	}

	var backups []string
	for i := range 3 {
		if err := os.MkdirAll(filepath.Join(dir, "member"), 0o700); err != nil {
			t.Fatal(err)
		}
		backup, err := member.Wipe(dir, t0.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatalf("Wipe #%d: %v", i+1, err)
		}
		backups = append(backups, backup)
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("after Wipe #%d, %s still exists (err %v)", i+1, dir, err)
		}
		if has, _ := member.HasData(backup); !has {
			t.Fatalf("backup %s holds no member data", backup)
		}
	}
	if want := dir + ".wiped-20260506T060811.000000000Z"; backups[2] != want {
		t.Fatalf("backup = %s, want %s (UTC timestamp)", backups[2], want)
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || filepath.Join(root, entries[0].Name()) != backups[2] {
		t.Fatalf("root holds %v, want only the newest backup %s", entries, backups[2])
	}
}

func TestWipeKeepsOtherDirs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "etcd")
	other := filepath.Join(root, "etcd2.wiped-20200101T000000.000000000Z")
	for _, d := range []string{dir, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := member.Wipe(dir, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("Wipe of %s removed %s: %v", dir, other, err)
	}
}
