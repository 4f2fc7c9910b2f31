package recovery

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"

	"github.com/homystack/nico/pkg/restore"
)

// validSHA256 is a sha256 in hex, as the upload declares it.
var validSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// validOp is an operation ID (it names a file).
var validOp = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{0,62}$`)

// snapshotPath is where the snapshot of op is stored: beside the data
// dir, which a restore replaces.
func (s *Server) snapshotPath(op string) string {
	return s.host.DataDir + ".recovery-" + op + ".db"
}

// receive stores the uploaded snapshot of the operation the headers name,
// streamed to a temporary file and hashed on the way; it is kept only when
// its sha256 is the one declared.
func (s *Server) receive(r *http.Request) error {
	op, want := r.Header.Get(restore.HeaderOp), r.Header.Get(restore.HeaderSHA256)
	if !validOp.MatchString(op) {
		return fmt.Errorf("%w: header %s %q is not an operation ID (want lower-case letters, digits, '-' and '.', as restore-20060102t150405)", ErrBadRequest, restore.HeaderOp, op)
	}
	if !validSHA256.MatchString(want) {
		return fmt.Errorf("%w: header %s %q is not a sha256 (want 64 lower-case hex digits)", ErrBadRequest, restore.HeaderSHA256, want)
	}
	if err := s.heldFor(op); err != nil {
		return err
	}
	dst := s.snapshotPath(op)
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".part-*")
	if err != nil {
		return fmt.Errorf("recovery: store the snapshot: %w", err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), r.Body)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("recovery: store the snapshot (%d bytes received): %w", n, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return fmt.Errorf("%w: the snapshot received (%d bytes) has sha256 %s, not the %s declared in %s: nothing stored", ErrBadRequest, n, got, want, restore.HeaderSHA256)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("recovery: store the snapshot: %w", err)
	}
	s.log.Info("snapshot received", "op", op, "bytes", n, "sha256", want)
	return nil
}

// checkedSnapshot is the path of op's stored snapshot once its sha256 is
// still want.
func (s *Server) checkedSnapshot(op, want string) (string, error) {
	path := s.snapshotPath(op)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%w: no snapshot stored for %s: upload it first (PUT %s)", ErrBadRequest, op, restore.PathSnapshot)
	}
	if err != nil {
		return "", fmt.Errorf("recovery: open the snapshot: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("recovery: hash the snapshot: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want {
		return "", fmt.Errorf("%w: the stored snapshot %s has sha256 %s, not %s: upload it again", ErrBadRequest, path, got, want)
	}
	return path, nil
}

// removeSnapshots drops the snapshots stored for operations.
func (s *Server) removeSnapshots() {
	old, _ := filepath.Glob(s.host.DataDir + ".recovery-*.db")
	for _, p := range old {
		_ = os.Remove(p)
	}
}
