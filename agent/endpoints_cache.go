package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/pki"
)

// DefaultDiscoverGrace is how long an agent that learns etcd's endpoints
// from the mesh waits for it before it falls back to the endpoints it
// cached on its last run (Config.EndpointsCache).
const DefaultDiscoverGrace = 10 * time.Second

// endpointsCache is the file in which an agent keeps the etcd client URLs it
// last reached the cluster through. It matters for a machine that was off
// while the gossip key was rotated twice or more: the mesh no longer
// understands it (members hold the keys of generations g-1, g and g+1), so
// it cannot learn endpoints from gossip; with the cache it reaches etcd,
// reads the current key generation (the gossip-keys controller) and rejoins the mesh. The
// same way, a machine whose seeds are gone reaches the store, whose node
// records name the gossip addresses its mesh member rejoins through
// (storePeers, agent/gossip.go).
type endpointsCache struct {
	Endpoints []string  `json:"endpoints"`
	SavedAt   time.Time `json:"savedAt"`
}

// cachedEndpoints reads the cache; none (and no error) when there is no
// file or no cache is configured.
func (a *Agent) cachedEndpoints() ([]string, error) {
	if a.cfg.EndpointsCache == "" {
		return nil, nil
	}
	return ReadEndpointsCache(a.cfg.EndpointsCache)
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
	var c endpointsCache
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("agent: endpoints cache %s: %w", path, err)
	}
	return c.Endpoints, nil
}

// cachedOthers are the cached endpoints other than this node's own: the
// cluster this node was part of. A cache that cannot be read counts as
// none (logged).
func (a *Agent) cachedOthers() []string {
	eps, err := a.cachedEndpoints()
	if err != nil {
		a.log.Warn("reading the etcd endpoints cache", "err", err)
	}
	return slices.DeleteFunc(eps, func(e string) bool { return e == a.cfg.ClientURL })
}

// cacheEndpoints writes eps to the cache when they differ from what was
// written last; errors are logged, since the cache only helps.
func (a *Agent) cacheEndpoints(eps []string) {
	if a.cfg.EndpointsCache == "" || len(eps) == 0 {
		return
	}
	eps = slices.Sorted(slices.Values(eps))
	a.cacheMu.Lock()
	defer a.cacheMu.Unlock()
	if slices.Equal(a.cached, eps) {
		return
	}
	b, _ := json.Marshal(endpointsCache{Endpoints: eps, SavedAt: a.Now().UTC()})
	if err := pki.WriteFile(a.cfg.EndpointsCache, b); err != nil {
		a.log.Warn("caching etcd endpoints", "file", a.cfg.EndpointsCache, "err", err)
		return
	}
	a.cached = eps
}
