package restore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/store"
)

// ErrNotHeld: a recovery's survivor would serve on its own URLs before its
// recovery holds it.
var ErrNotHeld = errors.New("restore: the recovery does not hold its survivor yet")

// serveHeld is Serve with a hold (a recovery's survivor):
//
//	stopped --force-new-cluster--> serves at a private   --hold written--> stopped --> serves at its own
//	          on a free loopback   loopback client URL     (the journal    client URL: every coordinator
//	          port, nobody knows   only                     in the slot)   that reaches it finds it held
//
// A coordinator finds the members at their client URLs (gossip, its
// config); none knows the private one, so none reaches the recovered
// cluster before it is held. A member that serves on its own URLs already
// (a resumed run) had its hold written before: it is written again, as
// idempotent.
func (f *LocalFleet) serveHeld(ctx context.Context, m *LocalMember, hold *FirstHold) (uint64, error) {
	if err := hold.Check(""); err != nil {
		return 0, err
	}
	if !isDone(m.Runtime.Done()) && m.private == "" {
		if err := f.writeHold(ctx, m.ClientURL, hold); err != nil {
			return 0, err
		}
		return f.clusterID(ctx, m)
	}
	if err := m.Runtime.Stop(ctx); err != nil {
		return 0, err
	}
	priv, err := privateURL(m.ClientURL)
	if err != nil {
		return 0, err
	}
	cfg := f.config(m, "", member.StateNew, true)
	cfg.ClientURL = priv
	if err := m.Runtime.Start(ctx, cfg); err != nil {
		return 0, fmt.Errorf("restore: start %s forced into a new cluster at %s: %w", m.Name, priv, err)
	}
	m.private = priv
	f.log().Info("recovered member serves at a private client URL until its recovery holds it", "node", m.Name, "url", priv)
	if err := f.writeHold(ctx, priv, hold); err != nil {
		return 0, err
	}
	if err := m.Runtime.Stop(ctx); err != nil {
		return 0, err
	}
	m.private = ""
	if err := m.Runtime.Start(ctx, f.config(m, "", member.StateNew, false)); err != nil {
		return 0, fmt.Errorf("restore: serve %s at its own URLs: %w", m.Name, err)
	}
	return f.clusterID(ctx, m)
}

// writeHold journals hold in the cluster served at u.
func (f *LocalFleet) writeHold(ctx context.Context, u string, hold *FirstHold) error {
	cli, err := f.dial(u)
	if err != nil {
		return err
	}
	defer cli.Close()
	st, err := store.New(cli, hold.Prefix)
	if err != nil {
		return err
	}
	if err := takeSlotIn(ctx, st, hold.Journal); err != nil {
		return fmt.Errorf("restore: hold the recovered cluster at %s: %w", u, err)
	}
	return nil
}

// privateURL is a client URL on a free loopback port, with clientURL's
// scheme and, when it is a loopback one, its host (the member's
// certificate names it).
func privateURL(clientURL string) (string, error) {
	u, err := url.Parse(clientURL)
	if err != nil {
		return "", fmt.Errorf("restore: client URL %q: %w", clientURL, err)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip == nil && host != "localhost") || (ip != nil && !ip.IsLoopback()) {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", fmt.Errorf("restore: a free loopback port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return u.Scheme + "://" + addr, nil
}
