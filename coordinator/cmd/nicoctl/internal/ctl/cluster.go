package ctl

import (
	"context"
	"errors"
	"fmt"
	"github.com/homystack/nico/pkg/objectapply"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/etcdadmin"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/membership"
	"github.com/homystack/nico/pkg/store"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// cluster is a connection to the fleet's etcd cluster and its store.
type cluster struct {
	cli       *clientv3.Client
	st        *store.Store
	admin     *etcdadmin.Admin
	clusterID api.MemberID
	// health bounds each call to one member.
	health time.Duration
}

// connect dials the endpoints and checks that the cluster answers within
// the timeout; when it does not, the error names the endpoints and ends
// nicoctl with ExitUsage.
func (a *app) connect(ctx context.Context) (*cluster, error) {
	eps := strings.Join(a.cfg.Endpoints, ",")
	unreachable := func(err error) error {
		return withCode(ExitUsage, fmt.Errorf("cannot reach etcd at %s: %w", eps, err))
	}
	if err := a.checkIdentity(); err != nil {
		return nil, err
	}
	tlsCfg, err := etcdclient.Files{CA: a.cfg.TLS.CAFile, Cert: a.cfg.TLS.CertFile, Key: a.cfg.TLS.KeyFile}.Load(a.cfg.Endpoints)
	if err != nil {
		return nil, withCode(ExitUsage, err)
	}
	if err := probe(ctx, a.cfg.Endpoints, tlsCfg, a.cfg.DialTimeout); err != nil {
		return nil, unreachable(err)
	}
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: a.cfg.Endpoints, DialTimeout: a.cfg.Timeout, TLS: tlsCfg})
	if err != nil {
		return nil, unreachable(err)
	}
	pctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	resp, err := cli.MemberList(pctx, clientv3.WithSerializable())
	if err != nil {
		cli.Close()
		if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "DeadlineExceeded") {
			err = fmt.Errorf("no answer within %s (--timeout)", a.cfg.Timeout)
		}
		return nil, unreachable(err)
	}
	st, err := store.New(cli, a.cfg.Prefix)
	if err != nil {
		cli.Close()
		return nil, withCode(ExitUsage, err)
	}
	health := min(max(a.cfg.Timeout/3, 100*time.Millisecond), 2*time.Second)
	return &cluster{cli: cli, st: st, admin: etcdadmin.New(cli, health), clusterID: api.MemberID(resp.Header.ClusterId), health: health}, nil
}

// Close closes the connection.
func (c *cluster) Close() { c.cli.Close() }

// withCluster runs fn with a connection, under a context bounded by the
// timeout.
func (a *app) withCluster(ctx context.Context, fn func(ctx context.Context, c *cluster) error) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	c, err := a.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// nodes lists the registered nodes.
func (c *cluster) nodes(ctx context.Context) ([]*api.Node, error) {
	nodes, _, err := store.List[api.Node](ctx, c.st, store.NodesDir)
	if err != nil {
		return nil, fmt.Errorf("reading nodes: %w", err)
	}
	return nodes, nil
}

// alive tells which nodes have a live heartbeat key.
func (c *cluster) alive(ctx context.Context) (map[string]bool, error) {
	alive, _, err := c.st.Alive(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading heartbeats: %w", err)
	}
	return alive, nil
}

// members observes the members, their health and the leader, and maps each
// to the registered node with its peer URL, or to the external member it
// is (as the coordinator does: an external member is no ghost).
func (c *cluster) members(ctx context.Context, nodes []*api.Node) ([]membership.Member, error) {
	ms, err := c.admin.Observe(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading members: %w", err)
	}
	return objectapply.MatchMembers(ctx, c.st, ms, nodes)
}

// activeOp reads the operation in flight, or nil.
func (c *cluster) activeOp(ctx context.Context) (*api.Operation, error) {
	op, err := c.st.ActiveOp(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the active operation: %w", err)
	}
	return op, nil
}

// label names a member for people: its node, else its external member's
// name, else its etcd name, else its ID.
func label(m membership.Member) string { return objectapply.Label(m) }

// memberOf finds the member of node: by its peer URL, else by name.
func memberOf(ms []membership.Member, node string) *membership.Member {
	for i := range ms {
		if ms[i].Node == node {
			return &ms[i]
		}
	}
	for i := range ms {
		if ms[i].Node == "" && ms[i].Name == node {
			return &ms[i]
		}
	}
	return nil
}
