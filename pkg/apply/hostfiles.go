package apply

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/homystack/nico/pkg/api"
)

// HostFiles writes a generation's host files (spec.hostFiles) on the host,
// outside the flake and the Nix store, and removes those the previous
// generation wrote that the new one no longer lists:
//
//	validate every path ─▶ resolve every content (secrets) ─▶ per file:
//	mkdir -p parent (0700) ─▶ same content, mode, owner? keep : write a
//	temporary file beside it, fsync, rename ─▶ remove what the manifest
//	lists and the spec does not ─▶ save the manifest
//
// Nothing is written when a path is refused or a secret cannot be read.
// The manifest (the paths last written) survives restarts when Manifest is
// set. Sync is safe for concurrent use.
type HostFiles struct {
	// Roots are the directories files may lie under
	// (DefaultHostFileRoots when nil).
	Roots []string
	// Manifest is the file that lists the paths the last Sync wrote
	// (memory only when empty).
	Manifest string
	// Secrets resolves secretRefs (nil: a secretRef fails).
	Secrets Secrets

	mu      sync.Mutex
	written []string // the manifest when Manifest is empty
}

// HostFilesResult is what a Sync did, by path.
type HostFilesResult struct {
	Written, Unchanged, Removed []string
}

// Sync makes the host hold exactly files (of those it manages).
func (h *HostFiles) Sync(ctx context.Context, files []api.HostFile) (HostFilesResult, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var res HostFilesResult
	roots := h.roots()
	if err := ValidateHostFiles(files, roots); err != nil {
		return res, err
	}
	contents, err := h.resolve(ctx, files)
	if err != nil {
		return res, err
	}
	want := make([]string, len(files))
	for i, f := range files {
		p := filepath.Clean(f.Path)
		want[i] = p
		changed, err := writeHostFile(p, contents[i], f, roots)
		if err != nil {
			return res, fmt.Errorf("%w: hostFiles[%d] %s: %w", ErrFetch, i, p, err)
		}
		if changed {
			res.Written = append(res.Written, p)
		} else {
			res.Unchanged = append(res.Unchanged, p)
		}
	}
	prev, err := h.loadManifest()
	if err != nil {
		return res, err
	}
	for _, p := range prev {
		if slices.Contains(want, p) || hostPathOK(p, roots) != nil {
			continue // still wanted, or never ours to remove (roots changed)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("%w: remove host file %s: %w", ErrFetch, p, err)
		}
		res.Removed = append(res.Removed, p)
	}
	return res, h.saveManifest(want)
}

func (h *HostFiles) roots() []string {
	if h.Roots == nil {
		return DefaultHostFileRoots()
	}
	return h.Roots
}

// resolve reads every file's content, each secret once.
func (h *HostFiles) resolve(ctx context.Context, files []api.HostFile) ([][]byte, error) {
	out := make([][]byte, len(files))
	cache := map[string]map[string][]byte{}
	for i, f := range files {
		if f.SecretRef == nil {
			out[i] = []byte(f.Inline)
			continue
		}
		if h.Secrets == nil {
			return nil, fmt.Errorf("%w: hostFiles[%d] (%s): secretRef %s: no secret store configured", ErrInvalid, i, f.Path, f.SecretRef.Name)
		}
		sec, ok := cache[f.SecretRef.Name]
		if !ok {
			var err error
			if sec, err = h.Secrets.Secret(ctx, f.SecretRef.Name); err != nil {
				return nil, fmt.Errorf("%w: hostFiles[%d] (%s): %w", ErrFetch, i, f.Path, err)
			}
			cache[f.SecretRef.Name] = sec
		}
		v, ok := sec[f.SecretRef.Key]
		if !ok {
			return nil, fmt.Errorf("%w: hostFiles[%d] (%s): secret %s has no key %q", ErrInvalid, i, f.Path, f.SecretRef.Name, f.SecretRef.Key)
		}
		out[i] = v
	}
	return out, nil
}

// writeHostFile makes p hold content with f's mode and owner, atomically;
// it reports whether it wrote.
func writeHostFile(p string, content []byte, f api.HostFile, roots []string) (bool, error) {
	mode, _ := HostFileMode(f) // validated
	uid, gid, err := resolveOwner(f.Owner)
	if err != nil {
		return false, err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	// A symbolic link on the way must not lead the file out of the roots.
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false, err
	}
	if !underRealRoot(real, roots) {
		return false, fmt.Errorf("its directory resolves to %s, outside the allowed roots %s", real, strings.Join(roots, ", "))
	}
	if same(p, content, mode, uid, gid) {
		return false, nil
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".nico-*")
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	if err := tmp.Chmod(fs.FileMode(mode)); err != nil {
		tmp.Close()
		return false, err
	}
	if uid >= 0 || gid >= 0 {
		if err := tmp.Chown(uid, gid); err != nil {
			tmp.Close()
			return false, err
		}
	}
	if _, err := tmp.Write(content); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return false, err
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return false, err
	}
	return true, nil
}

// underRealRoot tells whether dir (symbolic links resolved) lies in or
// under a root (its links resolved too).
func underRealRoot(dir string, roots []string) bool {
	for _, r := range roots {
		if rr, err := filepath.EvalSymlinks(r); err == nil {
			r = rr
		}
		r = filepath.Clean(r)
		if dir == r || strings.HasPrefix(dir, r+"/") || r == "/" {
			return true
		}
	}
	return false
}

// same tells whether p is a regular file holding content with mode and,
// where asked, owner.
func same(p string, content []byte, mode uint32, uid, gid int) bool {
	st, err := os.Lstat(p)
	if err != nil || !st.Mode().IsRegular() || uint32(st.Mode().Perm()) != mode {
		return false
	}
	if (uid >= 0 || gid >= 0) && !ownedBy(st, uid, gid) {
		return false
	}
	b, err := os.ReadFile(p)
	return err == nil && bytes.Equal(b, content)
}

// parseOwner splits "user[:group]" (names or numbers); "" is no owner.
func parseOwner(owner string) (usr, grp string, err error) {
	if owner == "" {
		return "", "", nil
	}
	usr, grp, _ = strings.Cut(owner, ":")
	if usr == "" || strings.Contains(grp, ":") {
		return "", "", fmt.Errorf("want \"user\", \"user:group\" or \"uid:gid\"")
	}
	return usr, grp, nil
}

// resolveOwner turns an owner into ids, -1 for those left unchanged.
func resolveOwner(owner string) (uid, gid int, err error) {
	usr, grp, err := parseOwner(owner)
	if err != nil || usr == "" {
		return -1, -1, err
	}
	uid, gid = -1, -1
	if uid, err = strconv.Atoi(usr); err != nil {
		u, lerr := user.Lookup(usr)
		if lerr != nil {
			return -1, -1, fmt.Errorf("owner %q: %w", owner, lerr)
		}
		uid, _ = strconv.Atoi(u.Uid)
	}
	if grp == "" {
		return uid, -1, nil
	}
	if gid, err = strconv.Atoi(grp); err != nil {
		g, lerr := user.LookupGroup(grp)
		if lerr != nil {
			return -1, -1, fmt.Errorf("owner %q: %w", owner, lerr)
		}
		gid, _ = strconv.Atoi(g.Gid)
	}
	return uid, gid, nil
}

func (h *HostFiles) loadManifest() ([]string, error) {
	if h.Manifest == "" {
		return slices.Clone(h.written), nil
	}
	b, err := os.ReadFile(h.Manifest)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("apply: host files manifest: %w", err)
	}
	var paths []string
	if err := json.Unmarshal(b, &paths); err != nil {
		return nil, fmt.Errorf("apply: host files manifest %s: %w", h.Manifest, err)
	}
	return paths, nil
}

func (h *HostFiles) saveManifest(paths []string) error {
	h.written = slices.Clone(paths)
	if h.Manifest == "" {
		return nil
	}
	b, _ := json.Marshal(paths)
	if err := os.MkdirAll(filepath.Dir(h.Manifest), 0o700); err != nil {
		return fmt.Errorf("apply: host files manifest: %w", err)
	}
	tmp := h.Manifest + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("apply: host files manifest: %w", err)
	}
	if err := os.Rename(tmp, h.Manifest); err != nil {
		return fmt.Errorf("apply: host files manifest: %w", err)
	}
	return nil
}
