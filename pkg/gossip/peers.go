package gossip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Seeds are for the first contact only. A member that is alone (a
// restart, a partition that healed) rejoins through any member it can
// learn of, in this order:
//
//  1. gossip.seeds;
//  2. the peers it last saw alive, kept in PeersFile in Config.DataDir
//     (a restarted member whose seeds were removed from the cluster);
//  3. the peers its PeerSource names (the agent reads the gossip
//     addresses the store's node records publish).
//
// Each step is tried only when the ones before it reached nobody.

// PeersFile is the file in Config.DataDir where a member keeps the peers
// it last saw alive (at most maxRememberedPeers), readable by the owner
// only, so that after a restart it can rejoin through them.
const PeersFile = "gossip-peers.json"

// maxRememberedPeers bounds the peers kept: enough that some are alive
// after a few failures, few enough that the file is rarely rewritten.
const maxRememberedPeers = 8

// Peer is a member of the mesh: its name and gossip address.
type Peer struct {
	Name string `json:"name"`
	Addr string `json:"addr"` // host:port
}

// PeerSource names the gossip addresses (host:port) of members known
// outside the mesh. Run calls it, under a deadline, only when this member
// is alone and neither its seeds nor its remembered peers answered.
type PeerSource func(ctx context.Context) ([]string, error)

// peersFile is the content of PeersFile.
type peersFile struct {
	Peers   []Peer    `json:"peers"`
	SavedAt time.Time `json:"savedAt"`
}

// loadPeers reads the peers kept in dir; none (and no error) when there is
// no file.
func loadPeers(dir string) ([]Peer, error) {
	b, err := os.ReadFile(filepath.Join(dir, PeersFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f peersFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", PeersFile, err)
	}
	return f.Peers, nil
}

// loadRemembered takes the peers kept in DataDir on the last run, if any.
func (m *Mesh) loadRemembered() {
	if m.cfg.DataDir == "" {
		return
	}
	peers, err := loadPeers(m.cfg.DataDir)
	if err != nil {
		m.log.Warn("the peers kept from the last run are not usable", "dir", m.cfg.DataDir, "err", err)
		return
	}
	m.remembered = peers
}

// SetPeerSource sets where Run learns more peers when it is alone and its
// seeds and remembered peers are gone (nil: nowhere). Set while this
// member is alone, Run tries at once.
func (m *Mesh) SetPeerSource(src PeerSource) {
	m.peersMu.Lock()
	m.source = src
	m.peersMu.Unlock()
	if src != nil {
		m.wake()
	}
}

// wake makes Run try to join at once.
func (m *Mesh) wake() {
	select {
	case m.rejoin <- struct{}{}:
	default:
	}
}

// RememberedPeers returns the peers this member keeps for its next rejoin.
func (m *Mesh) RememberedPeers() []Peer {
	m.peersMu.Lock()
	defer m.peersMu.Unlock()
	return slices.Clone(m.remembered)
}

// rememberPeers keeps up to maxRememberedPeers alive peers (itself
// excluded): those kept already that are still alive, then others by name.
// A change is written to PeersFile. While no peer is alive the last ones
// are kept: they are what a rejoin tries.
func (m *Mesh) rememberPeers() {
	alive := map[string]string{}
	for _, n := range m.tracker.inState(Alive) {
		if n.Name != m.cfg.Name && n.Addr != "" {
			alive[n.Name] = n.Addr
		}
	}
	if len(alive) == 0 {
		return
	}
	m.peersMu.Lock()
	defer m.peersMu.Unlock()
	var keep []Peer
	for _, p := range m.remembered {
		if addr, ok := alive[p.Name]; ok && len(keep) < maxRememberedPeers {
			keep = append(keep, Peer{Name: p.Name, Addr: addr})
			delete(alive, p.Name)
		}
	}
	names := make([]string, 0, len(alive))
	for name := range alive {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if len(keep) == maxRememberedPeers {
			break
		}
		keep = append(keep, Peer{Name: name, Addr: alive[name]})
	}
	sort.Slice(keep, func(i, j int) bool { return keep[i].Name < keep[j].Name })
	if slices.Equal(keep, m.remembered) {
		return
	}
	m.remembered = keep
	if m.cfg.DataDir == "" {
		return
	}
	b, _ := json.Marshal(peersFile{Peers: keep, SavedAt: m.cfg.Now().UTC()})
	if err := writeFileAtomic(m.cfg.DataDir, PeersFile, b); err != nil {
		m.log.Warn("persisting the peers last seen failed", "dir", m.cfg.DataDir, "err", err)
	}
}

// joinKnown joins through the seeds and, when this member is alone, the
// remembered peers and then the peer source (see the top of this file).
// It returns how many answered and how many addresses it tried; err is
// set when some were tried and none answered.
func (m *Mesh) joinKnown(ctx context.Context, alone bool) (answered, tried int, err error) {
	ml, err := m.memberlist()
	if err != nil {
		return 0, 0, err
	}
	self := m.Addr()
	seen := map[string]bool{self: true}
	fresh := func(addrs []string) []string {
		var out []string
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				a = net.JoinHostPort(a, strconv.Itoa(DefaultPort))
			}
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
		return out
	}
	var errs []error
	join := func(what string, addrs []string) {
		if answered > 0 || len(addrs) == 0 {
			return
		}
		tried += len(addrs)
		n, err := ml.Join(addrs)
		answered += n
		if n == 0 {
			if err == nil {
				err = errors.New("none answered")
			}
			errs = append(errs, fmt.Errorf("%s %v: %w", what, addrs, oneLine{err}))
		}
	}
	join("gossip.seeds", fresh(m.cfg.Seeds))
	if !alone {
		return answered, tried, m.joinErr(answered, tried, errs)
	}
	m.peersMu.Lock()
	remembered, src := slices.Clone(m.remembered), m.source
	m.peersMu.Unlock()
	addrs := make([]string, len(remembered))
	for i, p := range remembered {
		addrs[i] = p.Addr
	}
	join("peers last seen ("+PeersFile+")", fresh(addrs))
	if answered == 0 && src != nil {
		sctx, cancel := context.WithTimeout(ctx, m.memberlistConfig().TCPTimeout)
		learned, err := src(sctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("learning peers: %w", err))
		}
		join("learned peers", fresh(learned))
	}
	return answered, tried, m.joinErr(answered, tried, errs)
}

// oneLine is err on one line (memberlist's errors list one per line).
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.Join(strings.Fields(e.err.Error()), " ") }
func (e oneLine) Unwrap() error { return e.err }

// joinErr is joinKnown's error.
func (m *Mesh) joinErr(answered, tried int, errs []error) error {
	if answered > 0 || (tried == 0 && len(errs) == 0) {
		return nil
	}
	args := []any{ErrJoin}
	format := "%w: "
	for i, e := range errs {
		if i > 0 {
			format += "; "
		}
		format += "%w"
		args = append(args, e)
	}
	return fmt.Errorf(format, args...)
}
