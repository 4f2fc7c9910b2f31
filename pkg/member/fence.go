package member

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// FenceFile is the name of the Fence file inside a data dir.
const FenceFile = "nico-fenced.json"

// ErrFenced is returned by every Runtime's Start for a data dir that holds
// a Fence: its cluster was superseded by a restore or a recovery, and the
// member must be wiped and join the new cluster as a learner. Without it an
// old member restarted beside the new cluster could form the old quorum
// again with its old peers (a split brain).
var ErrFenced = errors.New("member: data dir is fenced: its cluster was superseded")

// Fence records that a data dir's cluster was superseded (by a restore
// from a snapshot or a quorum-loss recovery) and must never be served
// again.
type Fence struct {
	// By names the operation that fenced it (restore-..., recover-...).
	By string    `json:"by"`
	At time.Time `json:"at"`
	// Reason is for the operator reading the file.
	Reason string `json:"reason,omitempty"`
}

// WriteFence writes f to dir/nico-fenced.json (temp file, sync, rename). A
// dir that does not exist is not fenced: there is nothing to serve.
func WriteFence(dir string, f Fence) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("member: encode fence: %w", err)
	}
	tmp := filepath.Join(dir, "."+FenceFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("member: write fence in %s: %w", dir, err)
	}
	if fh, err := os.Open(tmp); err == nil {
		_ = fh.Sync()
		fh.Close()
	}
	if err := os.Rename(tmp, filepath.Join(dir, FenceFile)); err != nil {
		return fmt.Errorf("member: install fence in %s: %w", dir, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// ReadFence reads dir/nico-fenced.json; ok is false, with a nil error,
// when the data dir is not fenced.
func ReadFence(dir string) (f Fence, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, FenceFile))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// No data dir, or not a directory: nothing fenced (the runtime
		// reports what is wrong with the dir itself).
		return Fence{}, false, nil
	}
	if err != nil {
		return Fence{}, false, fmt.Errorf("member: read fence: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		// A fence that cannot be read still fences: never serve the dir.
		return Fence{By: "unreadable fence file"}, true, nil
	}
	return f, true, nil
}

// checkFence refuses a fenced data dir.
func checkFence(dir string) error {
	f, ok, err := ReadFence(dir)
	if err != nil {
		return err
	}
	if ok {
		return fmt.Errorf("%w: %s fenced by %s at %s; wipe it and join the new cluster", ErrFenced, dir, f.By, f.At.UTC().Format(time.RFC3339))
	}
	return nil
}
