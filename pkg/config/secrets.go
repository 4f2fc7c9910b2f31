package config

import "path/filepath"

// Secrets is where a program finds the store's secrets key (package
// secretbox): nicoctl needs it to create, list and revoke join tokens.
type Secrets struct {
	KeyFile string // "secrets.keyFile"
}

// secretsKeys are the secrets keys of nicoctl.
func secretsKeys(s *Secrets) []key {
	return []key{
		stringKey("secrets.keyFile", &s.KeyFile, filepath.Join(DefaultPKIDir, "secrets.key"),
			"the store's secrets key (32 bytes, mode 0600), which seals join tokens; on control-plane machines", absPath(false)),
	}
}
