package snapshot

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdclient"
)

// ErrNoHealthyMember: no voter answered its status without errors, so
// there is no member to take a snapshot from.
var ErrNoHealthyMember = errors.New("snapshot: no healthy voter to take a snapshot from")

// Source is the member a snapshot is taken from.
type Source struct {
	Name      string
	ID        api.MemberID
	ClientURL string
}

// PickSource chooses the member to take a snapshot from among ms (as
// etcdadmin.Admin.Statuses lists them): a voter that answered and reports
// no errors; one not named in avoid (the taker's own node, so that even a
// store on its disk holds the snapshot off the member's node) before one
// that is; a follower before the leader, which the stream would slow; and
// among those the one that has applied most.
func PickSource(ms []etcdadmin.MemberStatus, avoid ...string) (Source, error) {
	var best *etcdadmin.MemberStatus
	better := func(m, than *etcdadmin.MemberStatus) bool {
		if than == nil {
			return true
		}
		if mAvoid, tAvoid := slices.Contains(avoid, m.Name), slices.Contains(avoid, than.Name); mAvoid != tAvoid {
			return !mAvoid
		}
		mLeader, tLeader := m.Leader == m.ID, than.Leader == than.ID
		if mLeader != tLeader {
			return !mLeader
		}
		return m.AppliedIndex > than.AppliedIndex
	}
	var why []string
	for i := range ms {
		m := &ms[i]
		switch {
		case m.Learner:
			continue
		case !m.Reachable || len(m.ClientURLs) == 0:
			why = append(why, fmt.Sprintf("%s: %s", m.Name, m.Err))
			continue
		case len(m.Errors) > 0:
			why = append(why, fmt.Sprintf("%s: %v", m.Name, m.Errors))
			continue
		}
		if better(m, best) {
			best = m
		}
	}
	if best == nil {
		return Source{}, fmt.Errorf("%w (%v)", ErrNoHealthyMember, why)
	}
	return Source{Name: best.Name, ID: best.ID, ClientURL: best.ClientURLs[0]}, nil
}

// Save takes a snapshot from src over a client of its one endpoint (with
// tlsCfg, the caller's identity: etcdclient.TLSOf), puts it in st and
// removes the local file. opts.MemberName defaults to src.Name.
func Save(ctx context.Context, src Source, tlsCfg *tls.Config, st Store, opts TakeOptions) (Meta, error) {
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{src.ClientURL}, DialTimeout: 5 * time.Second, TLS: tlsCfg})
	if err != nil {
		return Meta{}, fmt.Errorf("snapshot: save from %s: %w", src.Name, err)
	}
	defer cli.Close()
	if opts.MemberName == "" {
		opts.MemberName = src.Name
	}
	tk, err := Take(ctx, cli, opts)
	if err != nil {
		return Meta{}, err
	}
	defer os.Remove(tk.Path)
	f, err := os.Open(tk.Path)
	if err != nil {
		return Meta{}, fmt.Errorf("snapshot: save: %w", err)
	}
	defer f.Close()
	if err := st.Put(ctx, tk.Meta, f); err != nil {
		return Meta{}, fmt.Errorf("snapshot: save %s to %s: %w", tk.Meta.Name, st.Where(), err)
	}
	return tk.Meta, nil
}
