package joinendpoint

import (
	"fmt"
	"os"
	"strings"

	"github.com/homystack/nico/pkg/enroll"
	"github.com/homystack/nico/pkg/pki"
)

// GossipSecret is what this machine's gossip keys derive from: the secret
// its join gave it (join.GossipSecretFile), or else its tokenFile (the
// bootstrap machine's token is the cluster's first gossip secret).
func GossipSecret(d pki.Dir, tokenFile string) ([]byte, error) {
	if d != "" {
		if b, err := os.ReadFile(enroll.GossipSecretFile(d)); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	if tokenFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("tokenFile: %w", err)
	}
	return []byte(strings.TrimSpace(string(b))), nil
}
