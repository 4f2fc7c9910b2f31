package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

type member struct {
	name    string
	learner bool
}

// change says in a user's words what becoming m means.
func (m member) change() string {
	if m.learner {
		return m.name + " was added as a learner: it copies the data and does not vote yet"
	}
	return m.name + " was promoted: it is a voter now"
}

func listMembers(ctx context.Context, cli *clientv3.Client) ([]member, error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cli.MemberList(cctx)
	if err != nil {
		return nil, err
	}
	var out []member
	for _, m := range resp.Members {
		name := m.Name
		if name == "" {
			name = fmt.Sprintf("(unstarted %x)", m.ID)
		}
		out = append(out, member{name: name, learner: m.IsLearner})
	}
	slices.SortFunc(out, func(a, b member) int {
		if a.name < b.name {
			return -1
		}
		if a.name > b.name {
			return 1
		}
		return 0
	})
	return out, nil
}

func voters(ms []member) int {
	n := 0
	for _, m := range ms {
		if !m.learner {
			n++
		}
	}
	return n
}

func waitMembers(ctx context.Context, cli *clientv3.Client, ok func([]member) bool) error {
	var last []member
	for {
		ms, err := listMembers(ctx, cli)
		if err == nil {
			last = ms
			if ok(ms) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (members: %v)", ctx.Err(), last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// etcdLeader returns the name of the member that leads etcd.
func etcdLeader(ctx context.Context, cli *clientv3.Client) (string, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cli.MemberList(cctx)
		if err == nil {
			for _, m := range resp.Members {
				if len(m.ClientURLs) == 0 {
					continue
				}
				if st, err := cli.Status(cctx, m.ClientURLs[0]); err == nil && st.Leader == m.ID {
					cancel()
					return m.Name, nil
				}
			}
		}
		cancel()
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no etcd leader: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
