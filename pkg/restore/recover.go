package restore

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ErrHasQuorum refuses a recovery of a cluster that still has quorum.
var ErrHasQuorum = errors.New("restore: the cluster still has quorum")

// ErrNoSurvivor is returned when no member answers at all.
var ErrNoSurvivor = errors.New("restore: no member answers")

// Survivor is one member that still answers, as it reports itself
// (Maintenance Status answers without quorum).
type Survivor struct {
	Node      string `json:"node"`
	ClientURL string `json:"clientURL"`
	MemberID  uint64 `json:"memberID"`
	Applied   uint64 `json:"appliedIndex"`
	Revision  int64  `json:"revision"`
	RaftTerm  uint64 `json:"raftTerm"`
	Leader    uint64 `json:"leader,omitempty"`
	Learner   bool   `json:"learner,omitempty"`
	Err       string `json:"error,omitempty"`
}

// Survey asks every member's client URL (node name -> URL; in a fleet
// they come from the gossip mesh's metadata, which needs no etcd) for its
// status, each within timeout. Members that do not answer are listed with
// their error. The most advanced voter comes first (applied index, then
// revision, then term).
func Survey(ctx context.Context, urls map[string]string, tlsCfg *tls.Config, timeout time.Duration) []Survivor {
	out := make([]Survivor, 0, len(urls))
	for node, u := range urls {
		s := Survivor{Node: node, ClientURL: u}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{u}, DialTimeout: timeout, TLS: tlsCfg, Logger: zap.NewNop()})
		if err == nil {
			sctx, cancel := context.WithTimeout(ctx, timeout)
			st, serr := cli.Status(sctx, u)
			cancel()
			cli.Close()
			err = serr
			if serr == nil {
				s.MemberID, s.Applied, s.Revision = st.Header.MemberId, st.RaftAppliedIndex, st.Header.Revision
				s.RaftTerm, s.Leader, s.Learner = st.RaftTerm, st.Leader, st.IsLearner
			}
		}
		if err != nil {
			s.Err = err.Error()
		}
		out = append(out, s)
	}
	sortSurvivors(out)
	return out
}

// sortSurvivors puts the most advanced answering voter first.
func sortSurvivors(ss []Survivor) {
	sort.SliceStable(ss, func(i, k int) bool { return ahead(ss[i], ss[k]) })
}

// ahead orders survivors: answering voters, most advanced first.
func ahead(a, b Survivor) bool {
	if (a.Err == "") != (b.Err == "") {
		return a.Err == ""
	}
	if a.Learner != b.Learner {
		return !a.Learner
	}
	if a.Applied != b.Applied {
		return a.Applied > b.Applied
	}
	if a.Revision != b.Revision {
		return a.Revision > b.Revision
	}
	if a.RaftTerm != b.RaftTerm {
		return a.RaftTerm > b.RaftTerm
	}
	return a.Node < b.Node
}

// CheckQuorumLost refuses when the cluster can still commit: a
// linearizable read through the survivors answers within timeout, or
// the voters that answer are a majority of voters (voters).
func CheckQuorumLost(ctx context.Context, survivors []Survivor, voters int, tlsCfg *tls.Config, timeout time.Duration) error {
	var eps []string
	for _, s := range survivors {
		if s.Err == "" && !s.Learner {
			eps = append(eps, s.ClientURL)
		}
	}
	if len(eps) == 0 {
		return fmt.Errorf("%w: none of the %d members answers its status", ErrNoSurvivor, len(survivors))
	}
	if len(eps) > voters/2 {
		return fmt.Errorf("%w: %d of %d voters answer (quorum is %d); a recovery would throw their cluster away: remove the dead members instead", ErrHasQuorum, len(eps), voters, voters/2+1)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: timeout, TLS: tlsCfg, Logger: zap.NewNop()})
	if err != nil {
		return fmt.Errorf("restore: dial the survivors: %w", err)
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if rev, err := store.CurrentRevision(rctx, cli, "health"); err == nil {
		return fmt.Errorf("%w: a linearizable read answered at revision %d", ErrHasQuorum, rev)
	}
	return nil
}

// RecoverJournal is the journal of a recovery onto the first survivor (the
// most advanced): the other answering members rejoin in the order given,
// then the nodes of replace (machines that replace the dead members, with
// empty data dirs).
func RecoverJournal(survivors []Survivor, replace []string, now time.Time) (*Journal, error) {
	if len(survivors) == 0 || survivors[0].Err != "" {
		return nil, ErrNoSurvivor
	}
	if survivors[0].Learner {
		// A learner may lack entries every lost voter had acknowledged.
		return nil, fmt.Errorf("%w: only learners answer (%s); a learner's log may miss acknowledged writes: restore from a snapshot instead", ErrNoSurvivor, survivors[0].Node)
	}
	j := &Journal{ID: "recover-" + now.UTC().Format("20060102t150405"), Kind: KindRecover, Target: survivors[0].Node, Step: StepStop, StartedAt: now, UpdatedAt: now}
	for _, s := range survivors[1:] {
		if s.Err == "" {
			j.Others = append(j.Others, s.Node)
		}
	}
	j.Others = append(j.Others, replace...)
	return j, nil
}

// RecoveryAllowed reads the EtcdCluster from the survivor at url with a
// serializable read (no quorum needed) and reports whether its policy lets
// a recovery go on without the operator's confirmation.
func RecoveryAllowed(ctx context.Context, url, prefix string, tlsCfg *tls.Config, timeout time.Duration) (bool, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: timeout, TLS: tlsCfg, Logger: zap.NewNop()})
	if err != nil {
		return false, fmt.Errorf("restore: dial %s: %w", url, err)
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	kv, _, err := store.GetUnderLocal(rctx, cli, prefix, store.EtcdClusterKey)
	if err != nil {
		return false, fmt.Errorf("restore: read the EtcdCluster from %s: %w", url, err)
	}
	if kv == nil {
		return false, nil
	}
	var c api.EtcdCluster
	if err := json.Unmarshal(kv.Value, &c); err != nil {
		return false, fmt.Errorf("restore: decode the EtcdCluster from %s: %w", url, err)
	}
	return c.Spec.Policy.RecoverWithoutConfirmation, nil
}
