package member

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/version"
)

// How a node changes etcd version. The member's etcd version is the
// binary it runs, so each runtime answers differently:
//
//   - Exec runs any binary it was given (WithBinaries; etcd.binaries in the
//     agent's configuration): UseVersion picks the one that reports the
//     version, and the next Start runs it on the same data dir.
//   - Embedded runs the etcd compiled into the agent (EmbeddedVersion): it
//     cannot run another; UseVersion refuses any other version.
//   - Systemd runs whatever binary the unit names (services.etcd.package on
//     NixOS): the version changes with a new NixOS generation, rolled by
//     the generation rollout (a switch does not restart etcd); UseVersion
//     accepts the version that generation's etcd reports
//     (SystemdConfig.Binary) and refuses any other.
//
// The agent asks UseVersion for the version the leader wants for its node
// (store.NodeEtcdVersionKey) and restarts the member; the leader waits for
// the member to report that version, healthy, before the next one.

// EmbeddedVersion is the etcd version compiled into this program: the only
// version the Embedded runtime runs.
var EmbeddedVersion = version.Version

// ErrVersionUnavailable is returned by UseVersion when the runtime has no
// etcd binary of the asked version.
var ErrVersionUnavailable = errors.New("member: etcd version not available to this runtime")

// Versioned is a Runtime that knows which etcd version its next Start runs
// and can be told to run another.
type Versioned interface {
	// Version is the etcd version the next Start runs ("" when unknown).
	Version() string
	// UseVersion makes the next Start run etcd v; ErrVersionUnavailable
	// when the runtime has no such binary. A running member keeps its
	// version until it is stopped and started again.
	UseVersion(v string) error
}

var (
	_ Versioned = (*Exec)(nil)
	_ Versioned = (*Embedded)(nil)
	_ Versioned = (*Systemd)(nil)
)

// BinaryVersion runs binary --version and returns the etcd version it
// prints ("etcd Version: 3.6.16").
func BinaryVersion(ctx context.Context, binary string) (string, error) {
	out, err := exec.CommandContext(ctx, binary, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("member: %s --version: %w", binary, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "etcd Version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("member: %s --version printed no \"etcd Version:\" line: %q", binary, out)
}

// BinariesByVersion asks every binary its version and returns them by
// version. Two binaries of one version are refused: which one runs would
// be a guess.
func BinariesByVersion(ctx context.Context, binaries []string) (map[string]string, error) {
	out := map[string]string{}
	for _, b := range binaries {
		v, err := BinaryVersion(ctx, b)
		if err != nil {
			return nil, err
		}
		if prev, ok := out[v]; ok && prev != b {
			return nil, fmt.Errorf("member: etcd binaries %s and %s are both version %s, want one binary per version", prev, b, v)
		}
		out[v] = b
	}
	return out, nil
}

// WithBinaries gives an Exec member the binaries it may run, by etcd
// version (see BinariesByVersion); UseVersion chooses among them.
// Embedded and Systemd members ignore it.
func WithBinaries(byVersion map[string]string) Option {
	return func(o *options) { o.binaries = maps.Clone(byVersion) }
}

// WithBinaryVersion says which etcd version the Exec member's default
// binary (NewExec's) is, so that Version knows it before any UseVersion.
func WithBinaryVersion(v string) Option {
	return func(o *options) { o.binaryVersion = v }
}

// Version is the version of the binary the next Start runs ("" unknown).
func (m *Exec) Version() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.version
}

// UseVersion makes the next Start run the binary of version v.
func (m *Exec) UseVersion(v string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v == m.version && v != "" {
		return nil
	}
	b, ok := m.opts.binaries[v]
	if !ok {
		have := slices.Sorted(maps.Keys(m.opts.binaries))
		return fmt.Errorf("%w: etcd %s; etcd.binaries has %v", ErrVersionUnavailable, v, have)
	}
	m.binary, m.version = b, v
	return nil
}

// Version is EmbeddedVersion.
func (m *Embedded) Version() string { return EmbeddedVersion }

// UseVersion accepts only EmbeddedVersion: an embedded member runs the
// etcd compiled into the agent, and another version needs another agent.
func (m *Embedded) UseVersion(v string) error {
	if v == EmbeddedVersion {
		return nil
	}
	return fmt.Errorf("%w: etcd %s; the embedded runtime runs only the etcd compiled into the agent, %s (run etcd.runtime exec with etcd.binaries, or systemd)",
		ErrVersionUnavailable, v, EmbeddedVersion)
}

// Version is the version the unit's etcd last reported ("" before it ran).
func (s *Systemd) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// UseVersion accepts the version the unit already runs, or the version of
// SystemdConfig.Binary: the unit runs its package's etcd
// (services.etcd.package), which only a new NixOS generation changes; the
// next Start restarts the unit on it.
func (s *Systemd) UseVersion(v string) error {
	if cur := s.Version(); v == cur && cur != "" {
		return nil
	}
	if s.binary != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if bv, err := BinaryVersion(ctx, s.binary); err == nil && bv == v {
			return nil
		}
	}
	return fmt.Errorf("%w: etcd %s; %s runs its package's etcd (%q, %s is %q): roll a NixOS generation whose services.etcd.package is etcd %s",
		ErrVersionUnavailable, v, s.unit, s.Version(), s.binary, s.binaryVersion(), v)
}

// binaryVersion is SystemdConfig.Binary's version, or why it is unknown.
func (s *Systemd) binaryVersion() string {
	if s.binary == "" {
		return "not set"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := BinaryVersion(ctx, s.binary)
	if err != nil {
		return err.Error()
	}
	return v
}
