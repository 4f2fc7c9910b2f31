package coordinator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/kubepki"
	"github.com/homystack/nico/pkg/store"
)

// pkiRecheck bounds how long a cluster's secrets go without the full
// check while nothing they follow from has changed.
const pkiRecheck = 10 * time.Minute

// ensureCache remembers, per cluster, the last full check of its secrets
// that changed nothing it had read: the leader's term it ran in, what it
// was asked (its inputs), the marks of what it read and until when the
// clock leaves that so. Ensure asked the same, in the same term, with
// the same marks, before that time, would read what that check read and
// decide what it decided: nothing to write. It returns the host files
// without the work.
//
//	pass --> read marks (one read of keys, no values; etcd's auth revision)
//	     --> same term, inputs, marks, clock in [at, until)? --> host files
//	     --> otherwise the full check --> remember it (marks read before it)
//
// The marks are read before the check: a change made after them (by the
// check itself or anyone) shows in the next pass's marks, which then do
// the full check again. A new term drops every entry.
type ensureCache struct {
	mu      sync.Mutex
	fence   store.Fence
	entries map[string]ensureEntry
	// checks counts the full checks made.
	checks int
}

// ensureEntry is one cluster's last full check.
type ensureEntry struct {
	inputs    string
	marks     ensureMarks
	at, until time.Time
}

// ensureMarks are what a cluster's secrets follow from in the store: the
// revision of each of its named secrets (every key under "<cluster>-",
// so another cluster's "<cluster>-2-ca" counts too), of each machine's
// Node (its certificate) and NodeSecrets, and etcd's auth revision (the
// etcd user and role; zero when the cluster has none in nico's etcd).
type ensureMarks struct {
	keys []keyRevision
	auth uint64
}

// keyRevision is a key's modification revision (zero: absent).
type keyRevision struct {
	key string
	rev int64
}

func (m ensureMarks) equal(o ensureMarks) bool {
	return m.auth == o.auth && slices.Equal(m.keys, o.keys)
}

// fresh tells whether cluster's last full check, in the term fence, holds
// for inputs and marks at now.
func (c *ensureCache) fresh(fence store.Fence, cluster, inputs string, marks ensureMarks, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[cluster]
	return ok && c.fence == fence && e.inputs == inputs && e.marks.equal(marks) && !now.Before(e.at) && now.Before(e.until)
}

// remember records cluster's full check in the term fence; a new term
// drops the entries of the one before.
func (c *ensureCache) remember(fence store.Fence, cluster string, e ensureEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || c.fence != fence {
		c.fence, c.entries = fence, map[string]ensureEntry{}
	}
	c.entries[cluster] = e
}

// forget drops cluster's entry: its next pass does the full check.
func (c *ensureCache) forget(cluster string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, cluster)
}

// checked counts a full check.
func (c *ensureCache) checked() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks++
}

// ensureInputs is what Ensure was asked for cluster c, as one string:
// every field of c the full check reads, the etcd identity's kind and
// which machines are the control plane.
func ensureInputs(c kubepki.Cluster, namespaced bool, controlPlane []string) string {
	return fmt.Sprintf("%q %q %q %q %q %t %t %q", c.Name, c.Provider, c.Endpoint, c.APIServerNames, c.Machines, c.DistributionKubeconfig, namespaced, controlPlane)
}

// marks reads cluster c's marks: the keys at one revision (keys and
// revisions, no values), etcd's auth revision when c's etcd identity is
// nico's.
func (k *KubePKISecrets) marks(ctx context.Context, c kubepki.Cluster) (ensureMarks, error) {
	secrets := store.DirKeys(store.NamedSecretKey(c.Name + "-"))
	ranges := []store.Range{secrets}
	for _, m := range c.Machines {
		ranges = append(ranges, store.KeyOnly(store.NodeKey(m)), store.KeyOnly(store.NodeNamedSecretsKey(m)))
	}
	v, err := k.Store.View(ctx, ranges...)
	if err != nil {
		return ensureMarks{}, err
	}
	var out ensureMarks
	for i, r := range ranges {
		kvs := v.KVs(r)
		if i > 0 && len(kvs) == 0 {
			out.keys = append(out.keys, keyRevision{}) // absent
		}
		for _, kv := range kvs {
			out.keys = append(out.keys, keyRevision{key: string(kv.Key), rev: kv.ModRevision})
		}
	}
	if c.Provider == kubepki.ProviderNico {
		st, err := k.Root.AuthStatus(ctx)
		if err != nil {
			return ensureMarks{}, err
		}
		out.auth = st.AuthRevision
	}
	return out, nil
}
