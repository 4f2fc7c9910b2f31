package member

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// MarkerFile is the name of the Marker file inside a data dir.
const MarkerFile = "nico-member.json"

// wipedTimeFormat is the UTC timestamp in "<dir>.wiped-<timestamp>"; it sorts
// lexically in time order.
const wipedTimeFormat = "20060102T150405.000000000Z"

// Marker records which member and cluster a data dir belongs to, so that an
// agent can tell its own data from a stale or foreign one.
type Marker struct {
	Name      string    `json:"name"`
	MemberID  uint64    `json:"memberID"`
	ClusterID uint64    `json:"clusterID"`
	WrittenAt time.Time `json:"writtenAt"`
	// EtcdVersion is the etcd version that last served this data dir: a
	// restarted agent runs that version again (an older binary refuses a
	// newer schema), not its default binary.
	EtcdVersion string `json:"etcdVersion,omitempty"`
	// QuotaBackendBytes is the database quota the member last started
	// with (0: etcd's default): a restart before the store answers keeps it.
	QuotaBackendBytes int64 `json:"quotaBackendBytes,omitempty"`
}

// WriteMarker writes m to dir/nico-member.json atomically (a temp file in dir,
// synced, then renamed over the old one). dir must exist.
func WriteMarker(dir string, m Marker) error {
	return writeJSON(filepath.Join(dir, MarkerFile), "marker", m)
}

// writeJSON writes v, indented, to path atomically: a temp file beside it,
// synced, renamed over the old one, and the directory synced. what names
// the file in errors.
func writeJSON(path, what string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("member: encode %s: %w", what, err)
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("member: write %s in %s: %w", what, dir, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // fails harmlessly after the rename
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("member: write %s %s: %w", what, tmp, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("member: sync %s %s: %w", what, tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("member: close %s %s: %w", what, tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("member: install %s in %s: %w", what, dir, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // make the rename durable where the filesystem allows
		d.Close()
	}
	return nil
}

// ReadMarker reads dir/nico-member.json. ok is false, with a nil error, when
// there is no marker.
func ReadMarker(dir string) (m Marker, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, MarkerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Marker{}, false, nil
	}
	if err != nil {
		return Marker{}, false, fmt.Errorf("member: read marker: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return Marker{}, false, fmt.Errorf("member: decode marker %s: %w", filepath.Join(dir, MarkerFile), err)
	}
	return m, true, nil
}

// HasData reports whether dir holds an etcd member, that is a "member"
// subdirectory.
func HasData(dir string) (bool, error) {
	fi, err := os.Stat(filepath.Join(dir, "member"))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("member: look for data in %s: %w", dir, err)
	case !fi.IsDir():
		return false, fmt.Errorf("member: %s is not a directory", filepath.Join(dir, "member"))
	}
	return true, nil
}

// Wipe moves dir aside to "<dir>.wiped-<UTC timestamp of now>" and returns
// that path; dir is absent afterwards. Only the newest wiped copy is kept:
// older ones are removed. When dir is absent, Wipe does nothing and returns
// "". The member must not be running.
func Wipe(dir string, now time.Time) (backup string, err error) {
	dir = filepath.Clean(dir)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("member: wipe %s: %w", dir, err)
	}
	backup = dir + ".wiped-" + now.UTC().Format(wipedTimeFormat)
	if err := os.Rename(dir, backup); err != nil {
		return "", fmt.Errorf("member: wipe %s: %w", dir, err)
	}
	older, err := wipedCopies(dir)
	if err != nil {
		return backup, err
	}
	for _, old := range older {
		if old == backup {
			continue
		}
		if err := os.RemoveAll(old); err != nil {
			return backup, fmt.Errorf("member: remove old wiped copy: %w", err)
		}
	}
	return backup, nil
}

// wipedCopies lists the "<dir>.wiped-*" paths, oldest first.
func wipedCopies(dir string) ([]string, error) {
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("member: list wiped copies of %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), base+".wiped-") {
			out = append(out, filepath.Join(parent, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}
