package events

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// source is one key or key directory events are derived from.
type source struct {
	key    string // a directory (ends in "/") or one key
	derive func(c Change) ([]Event, error)
}

// sources are every key events come from.
var sources = []source{
	{store.OpsDir, deriveOp},
	{store.JoinsDir, deriveJoin},
	{store.RemovalsDir, deriveRemoval},
	{store.NodesDir, deriveNode},
	{store.LivenessKey, deriveLiveness},
	{store.RolloutsDir, deriveRollout},
	{store.NixosConfigsDir, deriveGeneration},
	{store.MachinesDir, deriveMachine},
	{store.PoolsDir, derivePool},
	{store.EtcdClusterKey, deriveEtcdCluster},
	{store.GossipKeyKey, deriveGossipKey},
	{store.ClustersDir, deriveCluster},
}

// sourceOf returns the source of key, or nil.
func sourceOf(key string) *source {
	for i, s := range sources {
		dir := strings.HasSuffix(s.key, "/")
		if (!dir && key == s.key) || (dir && strings.HasPrefix(key, s.key) && len(key) > len(s.key)) {
			return &sources[i]
		}
	}
	return nil
}

// Watched tells whether events are derived from key.
func Watched(key string) bool { return sourceOf(key) != nil }

// Range is the smallest key range [start, end) that holds every source:
// one read of it is one revision of all of them, and one watch of it
// reports their changes in revision order. It holds other keys too, which
// Watched leaves out.
func Range() (start, end string) {
	keys := make([]string, len(sources))
	for i, s := range sources {
		keys[i] = s.key
	}
	slices.Sort(keys)
	last := keys[len(keys)-1]
	if strings.HasSuffix(last, "/") {
		return keys[0], clientv3.GetPrefixRangeEnd(last)
	}
	return keys[0], last + "\x00"
}

// Derive returns the events change c records, in the order they happened;
// none for a key that is not a source.
func Derive(c Change) ([]Event, error) {
	s := sourceOf(c.Key)
	if s == nil {
		return nil, nil
	}
	evs, err := s.derive(c)
	if err != nil {
		return nil, fmt.Errorf("events: %s at revision %d: %w", c.Key, c.Revision, err)
	}
	Sort(evs)
	return evs, nil
}

// decode reads the two values of c into prev and cur, each nil when c has
// no such value.
func decode[T any](c Change) (prev, cur *T, err error) {
	if c.Prev != nil {
		prev = new(T)
		if err := json.Unmarshal(c.Prev, prev); err != nil {
			return nil, nil, fmt.Errorf("decode previous value: %w", err)
		}
	}
	if c.Cur != nil {
		cur = new(T)
		if err := json.Unmarshal(c.Cur, cur); err != nil {
			return nil, nil, fmt.Errorf("decode value: %w", err)
		}
	}
	return prev, cur, nil
}
