package pki

import (
	"crypto/tls"
	"errors"
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

// WritePair writes a key pair as WriteFile would, so that a crash at any
// point leaves a pair that RecoverPair completes: both files are staged and
// synced first, then renamed in the order pairRenames gives (the new
// certificate to its next name, the key, the certificate), back to back.
// A reader loading the pair between the renames sees a certificate with
// another's key (a PairFile keeps its last matching pair then; a Renewer
// keeps a leaf's key, so renewals replace one file). keyPath "" writes
// certPath alone.
func WritePair(certPath string, certPEM []byte, keyPath string, keyPEM []byte) error {
	var certTmp, keyTmp string
	var err error
	defer func() {
		for _, tmp := range []string{certTmp, keyTmp} {
			if tmp != "" {
				os.Remove(tmp) // no-op after the rename
			}
		}
		if err != nil && keyPath != "" {
			_ = RecoverPair(certPath, keyPath) // a failed rename: one pair or the other
		}
	}()
	if keyPath != "" {
		if keyTmp, err = stage(keyPath, keyPEM); err != nil {
			return fmt.Errorf("pki: write %s: %w", keyPath, err)
		}
	}
	if certTmp, err = stage(certPath, certPEM); err != nil {
		return fmt.Errorf("pki: write %s: %w", certPath, err)
	}
	for _, r := range pairRenames(certPath, certTmp, keyPath, keyTmp) {
		if err = os.Rename(r.from, r.to); err != nil {
			return fmt.Errorf("pki: write %s: %w", r.to, err)
		}
		// The next certificate is on disk before the key is replaced.
		syncDir(filepath.Dir(r.to))
	}
	return nil
}

// rename is one step of a pair's write.
type rename struct{ from, to string }

// pairRenames is the order in which WritePair puts staged files in place.
// With a key, the certificate first takes its next name (nextCert): from
// then on RecoverPair can tell which pair the files hold at each step:
// before the key's rename the old one (the next certificate is dropped),
// after it the new one (the next certificate is put in place).
func pairRenames(certPath, certTmp, keyPath, keyTmp string) []rename {
	if keyPath == "" {
		return []rename{{certTmp, certPath}}
	}
	next := nextCert(certPath)
	return []rename{{certTmp, next}, {keyTmp, keyPath}, {next, certPath}}
}

// nextCert is where WritePair keeps a pair's new certificate while it
// replaces the key.
func nextCert(certPath string) string {
	return filepath.Join(filepath.Dir(certPath), "."+filepath.Base(certPath)+".next")
}

// RecoverPair finishes or drops a pair's write that a crash cut short
// (WritePair): when the certificate's next file is left, it is put in
// place if the key on disk is its key (the key was replaced) and removed
// otherwise (the old pair stands). With no next file it does nothing.
// Only the pair's writer calls it, before it reads the pair: a write in
// progress would look the same.
func RecoverPair(certPath, keyPath string) error {
	next := nextCert(certPath)
	certPEM, err := os.ReadFile(next)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pki: recover %s: %w", certPath, err)
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err == nil {
		_, err = tls.X509KeyPair(certPEM, keyPEM)
	}
	if err != nil {
		if err := os.Remove(next); err != nil {
			return fmt.Errorf("pki: recover %s: drop the unfinished write's certificate: %w", certPath, err)
		}
		syncDir(filepath.Dir(next))
		return nil
	}
	if err := os.Rename(next, certPath); err != nil {
		return fmt.Errorf("pki: recover %s: finish the write: %w", certPath, err)
	}
	syncDir(filepath.Dir(certPath))
	return nil
}

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
