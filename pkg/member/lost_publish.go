package member

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver"
)

// A learner sent a snapshot may find its own first publish inside it: the
// leader applied the publish before it built the snapshot, the member
// restores it instead of applying it as an entry, and etcd ends the
// publish's wait only on that entry's apply. The member then serves only
// after its publish times out (5 s plus two election timeouts). Restarting
// it once ends that at once: its indexes restart, the leader sends the
// entries past the snapshot, and the next publish arrives as an entry
// (docs/etcd-snapshot-join.md).

// lostPublishEvery is how often a starting member is checked for a lost
// publish; a hit counts when two checks in a row see it (a publish applied
// as an entry readies the member within milliseconds).
const lostPublishEvery = 50 * time.Millisecond

// errLostPublish says a member was published in its cluster's view but not
// ready: the runtimes restart it once.
var errLostPublish = errors.New("published in the cluster's membership but not ready: its own publish arrived inside a snapshot")

// restartable reports whether a Start may restart its member once on a lost
// publish: a first start, with an empty data dir, into an existing cluster.
func restartable(cfg Config) bool {
	if cfg.ClusterState != StateExisting || cfg.ForceNewCluster {
		return false
	}
	has, err := HasData(cfg.DataDir)
	return err == nil && !has
}

// lostPublish counts the checks in a row that saw a member published but
// not ready.
type lostPublish struct{ hits int }

// saw records one check and reports whether the publish counts as lost.
func (l *lostPublish) saw(published, ready bool) bool {
	if !published || ready {
		l.hits = 0
		return false
	}
	l.hits++
	return l.hits >= 2
}

// embeddedPublished reports whether the server's own membership entry
// carries client URLs, which only its publish sets (its name comes from
// --initial-cluster).
func embeddedPublished(s *etcdserver.EtcdServer) bool {
	m := s.Cluster().Member(s.MemberID())
	return m != nil && len(m.ClientURLs) > 0
}

// peerMember is one entry of etcd's peer /members answer.
type peerMember struct {
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
}

// peerPublished asks the member's own peer URL, served before it is ready,
// whether its membership entry carries client URLs.
func peerPublished(ctx context.Context, hc *http.Client, peerURL string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(peerURL, "/")+"/members", nil)
	if err != nil {
		return false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("GET %s/members: %s", peerURL, resp.Status)
	}
	var ms []peerMember
	if err := json.NewDecoder(resp.Body).Decode(&ms); err != nil {
		return false, fmt.Errorf("GET %s/members: %w", peerURL, err)
	}
	for _, m := range ms {
		if slices.Contains(m.PeerURLs, peerURL) {
			return len(m.ClientURLs) > 0, nil
		}
	}
	return false, nil
}

// peerClient is an HTTP client for the member's own peer URL, with its peer
// certificate pair when it has TLS.
func peerClient(cfg Config) (*http.Client, error) {
	tr := &http.Transport{DisableKeepAlives: true}
	if cfg.TLS != nil {
		_, peer := cfg.TLS.tlsInfos()
		tc, err := peer.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("peer TLS for %s: %w", cfg.PeerURL, err)
		}
		tr.TLSClientConfig = tc
	}
	return &http.Client{Transport: tr}, nil
}

// answerWithin bounds a check that a member's client URL answers: etcd
// accepts connections there before it is ready but answers only once it
// is, and a ready member on the same host answers within milliseconds.
// Each check of a member that lost its publish waits this long.
const answerWithin = 200 * time.Millisecond

// answers reports whether url's /version answers within answerWithin:
// etcd serves its client URL only once it is ready.
func answers(ctx context.Context, hc *http.Client, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, answerWithin)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/version", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return true
}

// watchPublish asks the child's peer URL every lostPublishEvery whether it
// is published, and cancels ctx with errLostPublish once two answers in a
// row say so while its client URL does not answer yet.
func watchPublish(ctx context.Context, cancel context.CancelCauseFunc, peer *http.Client, peerURL string, clientTLS *tls.Config, clientURL string) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: clientTLS}}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(lostPublishEvery)
	defer tick.Stop()
	var lp lostPublish
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		published, err := peerPublished(ctx, peer, peerURL)
		published = err == nil && published
		if lp.saw(published, published && answers(ctx, client, clientURL)) {
			cancel(errLostPublish)
			return
		}
	}
}

// watchLostPublish watches cfg's member from outside its process (the exec
// and systemd runtimes) until ctx ends: it cancels ctx with errLostPublish
// once the member lost its publish. stop cancels ctx and waits for the
// watch to end.
func watchLostPublish(ctx context.Context, cancel context.CancelCauseFunc, cfg Config, clientTLS *tls.Config) (stop func(), err error) {
	peer, err := peerClient(cfg)
	if err != nil {
		return nil, err
	}
	var watching sync.WaitGroup
	watching.Go(func() {
		defer peer.CloseIdleConnections()
		watchPublish(ctx, cancel, peer, cfg.PeerURL, clientTLS, cfg.ClientURL)
	})
	return func() {
		cancel(nil)
		watching.Wait()
	}, nil
}
