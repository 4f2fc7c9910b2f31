package etcdadmin

import (
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/homystack/nico/pkg/etcdclient"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// memberClients keeps one long-lived client per member, keyed by its client
// URL: made when the member is first asked, closed when it leaves the member
// list (retain) or the Admin closes. Each is bound to its one endpoint and
// never syncs it, and its Maintenance calls (Status, MoveLeader) go over its
// own connection: etcd's Maintenance dials a new connection per Status
// call, from the endpoints of the client it was made from, which races
// that client's auto-sync (etcd client v3.7 reads them unlocked).
type memberClients struct {
	tls         *tls.Config
	dialTimeout time.Duration

	mu     sync.Mutex
	byURL  map[string]*clientv3.Client
	closed bool
}

func newMemberClients(t *tls.Config, dialTimeout time.Duration) *memberClients {
	return &memberClients{tls: t, dialTimeout: dialTimeout, byURL: map[string]*clientv3.Client{}}
}

// memberRedialAfter is the first pause before a member client redials a
// lost connection (etcdclient.Config.RedialAfter).
const memberRedialAfter = 20 * time.Millisecond

// get returns the client of the member at url, making it on first use.
func (p *memberClients) get(url string) (*clientv3.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("etcdadmin: member client %s: %w", url, ErrClosed)
	}
	if cli := p.byURL[url]; cli != nil {
		return cli, nil
	}
	// A learner restarts once when its publish was lost (pkg/member):
	// redial soon, so that its status answers within milliseconds of
	// it serving, not after gRPC's one-second backoff.
	cli, err := etcdclient.New(etcdclient.Config{Endpoints: []string{url}, DialTimeout: p.dialTimeout, TLS: p.tls, RedialAfter: memberRedialAfter})
	if err != nil {
		return nil, fmt.Errorf("etcdadmin: member client %s: %w", url, err)
	}
	// Over this client's own connection, not a new one per call.
	cli.Maintenance = clientv3.NewMaintenanceFromMaintenanceClient(clientv3.RetryMaintenanceClient(cli, cli.ActiveConnection()), cli)
	p.byURL[url] = cli
	return cli, nil
}

// retain closes the clients of members whose URL is not in keep.
func (p *memberClients) retain(keep map[string]bool) {
	p.mu.Lock()
	var gone []*clientv3.Client
	for url, cli := range p.byURL {
		if !keep[url] {
			gone = append(gone, cli)
			delete(p.byURL, url)
		}
	}
	p.mu.Unlock()
	for _, cli := range gone {
		_ = cli.Close()
	}
}

// urls returns the URLs that have a client, for tests.
func (p *memberClients) urls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for url := range p.byURL {
		out = append(out, url)
	}
	return out
}

// close closes every client; later gets fail with ErrClosed. It is
// idempotent.
func (p *memberClients) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.retain(nil)
}
