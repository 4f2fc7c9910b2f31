package e2evm

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
)

// cpioEntry is one file, directory or symlink of an initramfs.
type cpioEntry struct {
	Mode uint32 // type and permission bits: 0o100755, 0o040755, 0o120777
	Data []byte // file content, or a symlink's target
}

// Mode bits of the entries the guest needs.
const (
	cpioDir  = 0o040000
	cpioFile = 0o100000
	cpioLink = 0o120000
)

// writeCpio writes files (path without a leading slash -> entry) as a
// "newc" cpio archive, the format the kernel unpacks into its initramfs:
// directories first, then everything in name order.
func writeCpio(w io.Writer, files map[string]cpioEntry) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		di, dj := files[names[i]].Mode&0o170000 == cpioDir, files[names[j]].Mode&0o170000 == cpioDir
		if di != dj {
			return di
		}
		return names[i] < names[j]
	})
	ino := 1
	put := func(name string, e cpioEntry) error {
		hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			ino, e.Mode, 0, 0, 1, 0, len(e.Data), 0, 0, 0, 0, len(name)+1, 0)
		ino++
		buf := append([]byte(hdr), name...)
		buf = append(buf, 0)
		buf = append(buf, make([]byte, pad4(len(buf)))...)
		buf = append(buf, e.Data...)
		buf = append(buf, make([]byte, pad4(len(e.Data)))...)
		_, err := w.Write(buf)
		return err
	}
	for _, n := range names {
		if err := put(n, files[n]); err != nil {
			return err
		}
	}
	return put("TRAILER!!!", cpioEntry{})
}

func pad4(n int) int { return (4 - n%4) % 4 }

// TestWriteCpio unpacks an archive with busybox's cpio, where there is one.
func TestWriteCpio(t *testing.T) {
	var b bytes.Buffer
	files := map[string]cpioEntry{
		"bin":        {Mode: cpioDir | 0o755},
		"bin/hello":  {Mode: cpioFile | 0o755, Data: []byte("#!/bin/sh\necho hi\n")},
		"bin/odd":    {Mode: cpioFile | 0o644, Data: []byte("x")},
		"bin/link":   {Mode: cpioLink | 0o777, Data: []byte("hello")},
		"etc":        {Mode: cpioDir | 0o755},
		"etc/a-long": {Mode: cpioFile | 0o600, Data: bytes.Repeat([]byte("y"), 1001)},
	}
	if err := writeCpio(&b, files); err != nil {
		t.Fatal(err)
	}
	if b.Len()%4 != 0 || !bytes.HasPrefix(b.Bytes(), []byte("070701")) {
		t.Fatalf("archive of %d bytes starts %q", b.Len(), b.Bytes()[:6])
	}
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox to unpack the archive with")
	}
	dir := t.TempDir()
	cmd := exec.Command(bb, "cpio", "-i", "-d")
	cmd.Dir, cmd.Stdin = dir, &b
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -i: %v: %s", err, out)
	}
	for name, e := range files {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		switch e.Mode & 0o170000 {
		case cpioFile:
			got, _ := os.ReadFile(p)
			if !bytes.Equal(got, e.Data) || uint32(fi.Mode().Perm()) != e.Mode&0o777 {
				t.Fatalf("%s: %q %v", name, got, fi.Mode())
			}
		case cpioLink:
			if target, _ := os.Readlink(p); target != string(e.Data) {
				t.Fatalf("%s -> %q", name, target)
			}
		case cpioDir:
			if !fi.IsDir() {
				t.Fatalf("%s is not a directory", name)
			}
		}
	}
}
