package recovery

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"time"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/restore"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Host is the machine a Server acts on, and the hooks into its agent.
type Host struct {
	Name, DataDir, PeerURL, ClientURL string
	// Runtime runs the member while the host is held (the agent's own
	// runtime once the agent stopped: a systemd unit stays one unit).
	Runtime member.Runtime
	// ForceRuntime, when set, runs a member started with
	// --force-new-cluster (a recovery's survivor) instead of Runtime: the
	// systemd runtime does not pass the flag (a restart of the unit would
	// force a new cluster again), so nico-agent gives the exec runtime
	// over the same etcd binary for that start.
	ForceRuntime member.Runtime
	// MemberTLS are the member's certificates (nil: plain http URLs).
	MemberTLS *member.TLS
	// ClientTLS is the host's client identity to etcd (its root
	// certificate: a member's status, adding it as a learner).
	ClientTLS *tls.Config
	// StopAgent stops the agent and its member and returns once both are
	// down; it is called again for a host already held, and must then
	// return at once.
	StopAgent func(ctx context.Context) error
	// Release hands the host back to the agent, which starts again and
	// serves the member from its data dir.
	Release func()
	// Peers lists the control-plane agents of the gossip mesh (nil: this
	// host only).
	Peers func() []restore.AgentPeer
	// Log is the server's logger; nil discards.
	Log *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// HoldFile is where the operation holding a host is kept: beside the
// data dir, since a restore or rejoin replaces the dir.
func HoldFile(dataDir string) string { return dataDir + ".recovery-hold.json" }

// hold is the content of the hold file.
type hold struct {
	Op string    `json:"op"`
	At time.Time `json:"at"`
}

// Held tells which operation holds the host whose data dir is dataDir, ""
// when none: the agent's main starts no agent while one does.
func Held(dataDir string) (string, error) {
	b, err := os.ReadFile(HoldFile(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("recovery: read the hold: %w", err)
	}
	var h hold
	if err := json.Unmarshal(b, &h); err != nil || h.Op == "" {
		return "unreadable hold file " + HoldFile(dataDir), nil
	}
	return h.Op, nil
}

func writeHold(dataDir, op string, at time.Time) error {
	b, err := json.Marshal(hold{Op: op, At: at})
	if err != nil {
		return fmt.Errorf("recovery: encode the hold: %w", err)
	}
	tmp := HoldFile(dataDir) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("recovery: write the hold: %w", err)
	}
	if err := os.Rename(tmp, HoldFile(dataDir)); err != nil {
		return fmt.Errorf("recovery: install the hold: %w", err)
	}
	return nil
}

// survey reads the host's state: the data dir from disk, the member from
// its own answer.
func (s *Server) survey(ctx context.Context) restore.HostState {
	h := s.host
	st := restore.HostState{Node: h.Name, ClientURL: h.ClientURL, PeerURL: h.PeerURL, DataDir: h.DataDir}
	st.Held, _ = Held(h.DataDir)
	switch f, fenced, err := member.ReadFence(h.DataDir); {
	case err != nil:
		st.Data, st.Err = restore.DataFenced, err.Error()
	case fenced:
		st.Data, st.Fence = restore.DataFenced, &f
	default:
		if _, err := os.Stat(h.DataDir); errors.Is(err, fs.ErrNotExist) {
			st.Data = restore.DataAbsent
		} else if ok, _ := member.HasData(h.DataDir); ok {
			st.Data = restore.DataMember
		} else {
			st.Data = restore.DataEmpty
		}
	}
	if mk, ok, _ := member.ReadMarker(h.DataDir); ok {
		st.MemberID, st.ClusterID = mk.MemberID, mk.ClusterID
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{h.ClientURL}, DialTimeout: time.Second, TLS: h.ClientTLS, Logger: zap.NewNop()})
	if err == nil {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var resp *clientv3.StatusResponse
		resp, err = cli.Status(sctx, h.ClientURL)
		cancel()
		cli.Close()
		if err == nil {
			st.Serving = true
			st.MemberID, st.ClusterID = resp.Header.MemberId, resp.Header.ClusterId
			st.Applied, st.Revision, st.RaftTerm = resp.RaftAppliedIndex, resp.Header.Revision, resp.RaftTerm
			st.Leader, st.Learner = resp.Leader, resp.IsLearner
		}
	}
	if err != nil && st.Err == "" {
		st.Err = err.Error()
	}
	return st
}
