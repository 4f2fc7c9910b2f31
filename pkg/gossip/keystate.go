package gossip

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeyStateFile is the file in Config.DataDir where a member keeps the key
// generation it last used, so that after a restart it speaks the
// generation it left with (and, once the stored generation is re-read from
// etcd, the current one) rather than generation 0.
const KeyStateFile = "gossip-key.json"

// keyState is the content of KeyStateFile. It holds no key: Check is the
// first 8 bytes of SHA-256 of the generation's key, so a member whose
// token (or cluster gossip secret) changed meanwhile ignores the file.
type keyState struct {
	Generation uint64 `json:"keyGeneration"`
	Check      string `json:"keyCheck"`
}

func keyCheck(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

// loadKeyGeneration returns the generation persisted in dir, if the file
// exists and matches the token; ok false otherwise (why in err when the
// file exists but is not usable).
func loadKeyGeneration(dir string, token []byte) (gen uint64, ok bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, KeyStateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var s keyState
	if err := json.Unmarshal(b, &s); err != nil {
		return 0, false, fmt.Errorf("%s: %w", KeyStateFile, err)
	}
	k, err := DeriveKey(token, s.Generation)
	if err != nil {
		return 0, false, err
	}
	if keyCheck(k) != s.Check {
		return 0, false, fmt.Errorf("%s: generation %d was derived from another token; starting from generation 0", KeyStateFile, s.Generation)
	}
	return s.Generation, true, nil
}

// saveKeyGeneration writes gen to dir atomically, readable by the owner only.
func saveKeyGeneration(dir string, token []byte, gen uint64) error {
	k, err := DeriveKey(token, gen)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(keyState{Generation: gen, Check: keyCheck(k)})
	return writeFileAtomic(dir, KeyStateFile, b)
}

// writeFileAtomic writes b to dir/name through a temporary file and a
// rename, readable by the owner only.
func writeFileAtomic(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, name))
}
