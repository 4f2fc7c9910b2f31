package apply

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Secrets resolves a named secret to its keys and values.
type Secrets interface {
	Secret(ctx context.Context, name string) (map[string][]byte, error)
}

// DirSecrets reads secret NAME from the files DIR/NAME/KEY (as systemd
// credentials or agenix lay them out).
type DirSecrets string

// Secret implements Secrets.
func (d DirSecrets) Secret(_ context.Context, name string) (map[string][]byte, error) {
	if !inside(name) || name == "" {
		return nil, fmt.Errorf("%w: secret name %q", ErrInvalid, name)
	}
	dir := filepath.Join(string(d), name)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("apply: secret %s: %w", name, err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("apply: secret %s: %w", name, err)
		}
		out[e.Name()] = b
	}
	return out, nil
}
