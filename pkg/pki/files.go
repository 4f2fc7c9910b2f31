package pki

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically: a temporary file in the same
// directory, mode 0600, synced, then renamed over path. A reader (etcd
// loading its key pair on a handshake) sees the old file or the new one,
// never half of one. Missing parent directories are created 0700.
func WriteFile(path string, data []byte) error {
	return WritePair(path, data, "", nil)
}

// WritePair writes a key pair as WriteFile would, both files staged and
// synced first, then renamed key first, certificate second, back to back,
// and the directory synced after both: a reader loading the pair between
// the two renames sees a certificate with another's key (a PairFile keeps
// its last matching pair then; a Renewer keeps a leaf's key, so renewals
// replace one file). keyPath "" writes certPath alone.
func WritePair(certPath string, certPEM []byte, keyPath string, keyPEM []byte) error {
	var staged []staging
	defer func() {
		for _, s := range staged {
			os.Remove(s.tmp) // no-op after the rename
		}
	}()
	for _, f := range []struct {
		path string
		data []byte
	}{{keyPath, keyPEM}, {certPath, certPEM}} {
		if f.path == "" {
			continue
		}
		tmp, err := stage(f.path, f.data)
		if err != nil {
			return fmt.Errorf("pki: write %s: %w", f.path, err)
		}
		staged = append(staged, staging{tmp: tmp, path: f.path})
	}
	for _, s := range staged {
		if err := os.Rename(s.tmp, s.path); err != nil {
			return fmt.Errorf("pki: write %s: %w", s.path, err)
		}
	}
	for _, s := range staged {
		syncDir(filepath.Dir(s.path))
	}
	return nil
}

type staging struct{ tmp, path string }

// stage writes data into a synced 0600 temporary file next to path (its
// directory created 0700) and returns the temporary file's name.
func stage(path string, data []byte) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := tmp.Name()
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// syncDir makes a rename in dir durable; best effort.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
