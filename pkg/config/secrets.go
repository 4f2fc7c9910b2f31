package config

import (
	"fmt"
	"path/filepath"
)

// Secrets is where a program finds the store's secrets key (package
// secretbox): nicoctl needs it to create, list and revoke join tokens.
type Secrets struct {
	KeyFile string // "secrets.keyFile"
}

// secretsKeys are the secrets keys of nicoctl: a path absolute or relative
// to the working directory, like its certificates' (LoadCtl resolves it).
func secretsKeys(s *Secrets) []key {
	return []key{
		stringKey("secrets.keyFile", &s.KeyFile, filepath.Join(DefaultPKIDir, "secrets.key"),
			"the store's secrets key (32 bytes, mode 0600), which seals join tokens; on control-plane machines; a relative path is the working directory's", anyPath),
	}
}

// absolute resolves a relative key file path against the working directory.
func (s *Secrets) absolute() error {
	abs, err := filepath.Abs(s.KeyFile)
	if err != nil {
		return fmt.Errorf("resolve %q: %w", s.KeyFile, err)
	}
	s.KeyFile = abs
	return nil
}
