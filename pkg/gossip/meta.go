package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// MaxMetaSize is memberlist's cap on a member's metadata.
const MaxMetaSize = 512

// metaVersion is the codec version written first in every encoding.
const metaVersion = 1

// Roles a member can publish. Their order is their bit in the encoding:
// never reorder, only append.
var knownRoles = []string{"controlPlane", "worker", "coordinator", "hypervisor"}

// Health digest bits.
const (
	HealthOK      Health = 1 << iota // the agent's own checks pass
	HealthEtcd                       // the local etcd member answers
	HealthVoter                      // the local etcd member is a voter
	HealthLearner                    // the local etcd member is a learner
	HealthLeaving                    // the member is leaving the mesh gracefully
)

// Health is a compact digest of a member's health.
type Health uint8

// Has tells whether every bit of b is set.
func (h Health) Has(b Health) bool { return h&b == b }

// Errors of the metadata codec.
var (
	ErrMetaTooLarge = errors.New("gossip: metadata too large")
	ErrMetaInvalid  = errors.New("gossip: invalid metadata")
)

// Meta is what a member publishes about itself in the mesh.
type Meta struct {
	Name       string   // the machine's name
	Roles      []string // among controlPlane, worker, coordinator, hypervisor
	Version    string   // the agent's version
	ClientURL  string   // etcd client URL it serves, "" when none
	Generation string   // the NixOS generation it applied
	Health     Health
}

// Voter tells whether the member serves etcd clients as a voter.
func (m Meta) Voter() bool { return m.ClientURL != "" && m.Health.Has(HealthVoter) }

// Encode renders m compactly:
//
//	version(1) roles(1, bitmask) health(1) then name, version, clientURL,
//	generation, each as uvarint length + bytes
//
// It refuses, rather than truncates, an encoding over MaxMetaSize.
func (m Meta) Encode() ([]byte, error) {
	var roles byte
	for _, r := range m.Roles {
		i := slices.Index(knownRoles, r)
		if i < 0 {
			return nil, fmt.Errorf("%w: role %q is not known; accepted: %v", ErrMetaInvalid, r, knownRoles)
		}
		roles |= 1 << i
	}
	b := []byte{metaVersion, roles, byte(m.Health)}
	for _, s := range []string{m.Name, m.Version, m.ClientURL, m.Generation} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	if len(b) > MaxMetaSize {
		return nil, fmt.Errorf("%w: %d bytes, memberlist carries at most %d (name %d, version %d, client URL %d, generation %d bytes): shorten them",
			ErrMetaTooLarge, len(b), MaxMetaSize, len(m.Name), len(m.Version), len(m.ClientURL), len(m.Generation))
	}
	return b, nil
}

// DecodeMeta parses an encoding of Meta. Bytes after the known fields are
// ignored (a newer minor encoding may append fields); a newer major
// version, a truncated field or an unknown role bit is an error.
func DecodeMeta(b []byte) (Meta, error) {
	if len(b) < 3 {
		return Meta{}, fmt.Errorf("%w: %d bytes, want at least 3", ErrMetaInvalid, len(b))
	}
	if b[0] != metaVersion {
		return Meta{}, fmt.Errorf("%w: version %d, this build reads %d", ErrMetaInvalid, b[0], metaVersion)
	}
	var m Meta
	for i := range 8 {
		if b[1]&(1<<i) == 0 {
			continue
		}
		if i >= len(knownRoles) {
			return Meta{}, fmt.Errorf("%w: unknown role bit %d", ErrMetaInvalid, i)
		}
		m.Roles = append(m.Roles, knownRoles[i])
	}
	m.Health = Health(b[2])
	rest := b[3:]
	for _, p := range []*string{&m.Name, &m.Version, &m.ClientURL, &m.Generation} {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return Meta{}, fmt.Errorf("%w: truncated field", ErrMetaInvalid)
		}
		*p = string(rest[k : k+int(n)])
		rest = rest[k+int(n):]
	}
	return m, nil
}
