package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// DefaultDiscoverGrace is how long an agent that learns etcd's endpoints
// from the mesh waits for it before it falls back to the endpoints it
// cached on its last run (Config.EndpointsCache).
const DefaultDiscoverGrace = 10 * time.Second

// endpointsCache is the file in which an agent keeps the etcd client URLs it
// last reached the cluster through (Config.EndpointsCache). It matters for a
// machine that was off while the gossip key was rotated twice or more: the
// mesh no longer understands it (members hold the keys of generations g-1,
// g and g+1), so it cannot learn endpoints from gossip; with the cache it
// reaches etcd, reads the current key generation (the gossip-keys
// controller) and rejoins the mesh. The same way, a machine whose seeds are
// gone reaches the store, whose node records name the gossip addresses its
// mesh member rejoins through (storePeers, agent/gossip.go). Safe for
// concurrent use.
type endpointsCache struct {
	path string // "": no cache
	log  *slog.Logger
	mu   sync.Mutex
	last []string // the endpoints written last
}

// endpointsRecord is the cache file's content.
type endpointsRecord struct {
	Endpoints []string  `json:"endpoints"`
	SavedAt   time.Time `json:"savedAt"`
}

// read reads the cache; none (and no error) when there is no file or no
// cache is configured.
func (c *endpointsCache) read() ([]string, error) {
	if c.path == "" {
		return nil, nil
	}
	return ReadEndpointsCache(c.path)
}

// ReadEndpointsCache reads the etcd client URLs an agent cached at path
// (Config.EndpointsCache); none (and no error) when there is no file.
func ReadEndpointsCache(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent: endpoints cache: %w", err)
	}
	var r endpointsRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("agent: endpoints cache %s: %w", path, err)
	}
	return r.Endpoints, nil
}

// others are the cached endpoints other than self, this node's own: the
// cluster this node was part of. A cache that cannot be read counts as
// none (logged).
func (c *endpointsCache) others(self string) []string {
	eps, err := c.read()
	if err != nil {
		c.log.Warn("reading the etcd endpoints cache", "err", err)
	}
	return slices.DeleteFunc(eps, func(e string) bool { return e == self })
}

// save writes eps, reached at now, to the cache when they differ from what
// was written last; errors are logged, since the cache only helps.
func (c *endpointsCache) save(eps []string, now time.Time) {
	if c.path == "" || len(eps) == 0 {
		return
	}
	eps = slices.Sorted(slices.Values(eps))
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.Equal(c.last, eps) {
		return
	}
	b, _ := json.Marshal(endpointsRecord{Endpoints: eps, SavedAt: now.UTC()})
	if err := pki.WriteFile(c.path, b); err != nil {
		c.log.Warn("caching etcd endpoints", "file", c.path, "err", err)
		return
	}
	c.last = eps
}
