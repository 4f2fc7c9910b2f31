package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/homystack/nico/pkg/controller"
	"github.com/homystack/nico/pkg/etcdclient"
	"github.com/homystack/nico/pkg/member"
	"github.com/homystack/nico/pkg/pki"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// PKIConfig is where the agent keeps its certificates and keys
// (docs/security.md, "Files"), and the CA a user gives the bootstrap
// machine instead of letting it make one.
type PKIConfig struct {
	// Dir is <dataDir>/pki. Empty: no TLS at all, which only tests against
	// a plaintext etcd use; nico-agent always sets it.
	Dir pki.Dir
	// CACertFile and CAKeyFile, both set, are a user-given CA that the
	// bootstrap machine copies into Dir.
	CACertFile, CAKeyFile string
}

// ErrNoCertificates is returned by Run when pki.dir holds no certificates
// and the agent has no way to get them (no ObtainCerts, no bootstrap).
var ErrNoCertificates = errors.New("agent: no certificates in pki.dir")

// ObtainCertsFunc gets this machine's certificates through the join
// endpoint (package enroll): it writes into dir at least ca.crt and
// node.{crt,key}, and on a control-plane machine ca.key and secrets.key
// too, after which the agent issues its own etcd certificates.
type ObtainCertsFunc func(ctx context.Context, dir pki.Dir) error

// secretsKeySize is the size of the store encryption key (AES-256).
const secretsKeySize = 32

// The certificates of a machine, by pki.Dir name.
const (
	certNode        = pki.NodeLeaf
	certEtcdServer  = pki.EtcdServerLeaf
	certEtcdPeer    = pki.EtcdPeerLeaf
	certCoordinator = pki.CoordinatorLeaf
	certRoot        = pki.RootLeaf
)

// machinePKI puts in pki.dir what a machine needs before its agent talks
// to etcd:
//
//	no ca.crt ──bootstrap──▶ make the CA (or copy the user's) + secrets.key
//	    │
//	    └────otherwise────▶ ObtainCerts (join endpoint) ──▶ ca.crt, node cert [, ca.key]
//	ca.key present ──▶ issue every missing leaf: node; on control-plane
//	                   machines etcd-server, etcd-peer, coordinator, root
//	no ca.key, no node cert ──▶ ObtainCerts
type machinePKI struct {
	cfg          PKIConfig
	bootstrap    bool            // the machine may make the cluster CA
	controlPlane bool            // it holds a member's leaves and needs ca.key
	obtain       ObtainCertsFunc // nil: no join endpoint to obtain them through
	issuer       *leafIssuer
	leaves       *memberLeaves // the member's leaves, issued alongside the join
	now          func() time.Time
	log          *slog.Logger
	status       func(string) // the service manager's status line
}

// machinePKI is the agent's, with the functions its caller set.
func (a *Agent) machinePKI() *machinePKI {
	return &machinePKI{cfg: a.cfg.PKI, bootstrap: a.cfg.Bootstrap, controlPlane: a.controlPlane(), obtain: a.ObtainCerts,
		issuer: a.leafIssuer(), leaves: &a.leaves, now: a.Now, log: a.log, status: a.status}
}

// ensurePKI puts the machine's certificates in place (machinePKI) and sets
// a.tls, its client identity.
func (a *Agent) ensurePKI(ctx context.Context) error {
	t, err := a.machinePKI().ensure(ctx)
	if err != nil {
		return err
	}
	a.tls = t
	return nil
}

// ensure puts the certificates in place and returns the client identity
// of node.{crt,key}; nil without pki.dir.
func (p *machinePKI) ensure(ctx context.Context) (*tls.Config, error) {
	d := p.cfg.Dir
	if d == "" {
		return nil, nil
	}
	if err := p.recoverPairs(); err != nil {
		return nil, err
	}
	if !exists(d.CACert()) {
		switch {
		case p.bootstrap && p.controlPlane:
			if err := p.makeCA(); err != nil {
				return nil, err
			}
		default:
			if err := p.obtainCerts(ctx, "no ca.crt"); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case exists(d.CAKey()):
		if err := p.issueLeaves(ctx); err != nil {
			return nil, err
		}
	case !exists(d.Cert(certNode)):
		if err := p.obtainCerts(ctx, "no node certificate"); err != nil {
			return nil, err
		}
	}
	if p.controlPlane && !exists(d.CAKey()) && !exists(d.Cert(certEtcdPeer)) {
		return nil, fmt.Errorf("%w: %s has no etcd-peer certificate and no ca.key to issue one; a control-plane machine needs the CA key (join with a control-plane token)", ErrNoCertificates, d)
	}
	t, err := pki.ClientTLS(d.CACert(), d.Cert(certNode), d.Key(certNode))
	if err != nil {
		return nil, fmt.Errorf("agent: client TLS from %s: %w", d, err)
	}
	return t, nil
}

// recoverPairs finishes or drops the key pair writes (the CA's, each
// leaf's) that a crash cut short (pki.RecoverPair), before anything reads
// them: the agent is their only writer and starts none before ensure.
func (p *machinePKI) recoverPairs() error {
	d := p.cfg.Dir
	if err := pki.RecoverPair(d.CACert(), d.CAKey()); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	for n := range p.issuer.reqs {
		if err := pki.RecoverPair(d.Cert(n), d.Key(n)); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
	}
	return nil
}

// obtainCerts runs ObtainCerts, or says why the machine has no
// certificates.
func (p *machinePKI) obtainCerts(ctx context.Context, why string) error {
	if p.obtain == nil {
		return fmt.Errorf("%w (%s: %s); copy them from a control-plane machine, join with a token, or set bootstrap on the first machine", ErrNoCertificates, p.cfg.Dir, why)
	}
	p.status("obtaining certificates through the join endpoint")
	if err := p.obtain(ctx, p.cfg.Dir); err != nil {
		return fmt.Errorf("agent: obtain certificates: %w", err)
	}
	return nil
}

// makeCA makes the cluster CA, or copies the user's, and the store's
// secrets key, on the bootstrap machine.
func (p *machinePKI) makeCA() error {
	d := p.cfg.Dir
	var ca *pki.CA
	var err error
	if p.cfg.CACertFile != "" {
		if ca, err = pki.LoadCA(p.cfg.CACertFile, p.cfg.CAKeyFile); err != nil {
			return fmt.Errorf("agent: pki.caCertFile: %w", err)
		}
		p.log.Info("using the given CA", "subject", ca.Cert.Subject.String())
	} else {
		if ca, err = pki.NewCA("nico cluster CA", pki.DefaultCAValidity, p.now()); err != nil {
			return fmt.Errorf("agent: make CA: %w", err)
		}
		p.log.Info("made the cluster CA", "dir", string(d), "notAfter", ca.Cert.NotAfter)
	}
	if !exists(d.SecretsKey()) {
		key := make([]byte, secretsKeySize)
		if _, err := rand.Read(key); err != nil {
			return fmt.Errorf("agent: secrets key: %w", err)
		}
		if err := pki.WriteFile(d.SecretsKey(), key); err != nil {
			return fmt.Errorf("agent: secrets key: %w", err)
		}
	}
	if err := ca.Save(d.CACert(), d.CAKey()); err != nil {
		return fmt.Errorf("agent: save CA: %w", err)
	}
	return nil
}

// leafRequests are the certificates a machine of cfg holds, by name.
func leafRequests(cfg Config) map[string]pki.Request {
	reqs := map[string]pki.Request{
		certNode: {CommonName: pki.NodeIdentity(cfg.Name), Usage: pki.UsageClient},
	}
	if !cfg.controlPlane() {
		return reqs
	}
	// Both also name loopback: local clients dial the server by it, and
	// etcd checks a peer's client certificate against the connection's
	// source address, which is 127.0.0.1 between members on one host.
	member := pki.MemberIdentity(cfg.Name)
	server := withLoopback(sans(cfg.ClientURL))
	server.CommonName, server.Usage = member, pki.UsageServer|pki.UsageClient
	peer := withLoopback(sans(cfg.PeerURL))
	peer.CommonName, peer.Usage = member, pki.UsagePeer
	reqs[certEtcdServer] = server
	reqs[certEtcdPeer] = peer
	reqs[certCoordinator] = pki.Request{CommonName: pki.CoordinatorIdentity, Usage: pki.UsageClient}
	reqs[certRoot] = pki.Request{CommonName: pki.RootIdentity, Usage: pki.UsageClient}
	return reqs
}

// caCheckInterval is how often the renewer looks whether another CA signs
// (nicoctl ca activate): its leaves follow within it, not within an hour.
const caCheckInterval = 5 * time.Second

// leafIssuer keeps a machine's leaves valid with ca.key (pki.Renewer): it
// issues those missing and re-issues those expiring, signed by another
// CA, or whose request changed (new URLs).
type leafIssuer struct {
	dir   pki.Dir
	reqs  map[string]pki.Request // the leaves, by name (leafRequests)
	every time.Duration          // between renewal passes (RenewInterval)
	now   func() time.Time
	log   *slog.Logger
}

// leafIssuer is the agent's, with the renewal interval its caller set.
func (a *Agent) leafIssuer() *leafIssuer {
	return &leafIssuer{dir: a.cfg.PKI.Dir, reqs: leafRequests(a.cfg), every: a.RenewInterval, now: a.Now, log: a.log}
}

// renewer is a pki.Renewer of the leaves keep picks by name (nil: all).
func (l *leafIssuer) renewer(keep func(name string) bool) (*pki.Renewer, error) {
	var leaves []pki.Leaf
	for _, n := range slices.Sorted(maps.Keys(l.reqs)) {
		if keep == nil || keep(n) {
			leaves = append(leaves, pki.Leaf{Name: n, CertFile: l.dir.Cert(n), KeyFile: l.dir.Key(n), Request: l.reqs[n]})
		}
	}
	r, err := pki.NewRenewer(pki.RenewerConfig{
		CA:       func() (*pki.CA, error) { return pki.LoadCA(l.dir.CACert(), l.dir.CAKey()) },
		Leaves:   leaves,
		Interval: l.every,
		CACheck:  caCheckInterval,
	}, l.log)
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	r.Now = l.now
	return r, nil
}

// pass runs one renewal pass over the leaves keep picks (nil: all).
func (l *leafIssuer) pass(ctx context.Context, keep func(name string) bool) error {
	r, err := l.renewer(keep)
	if err != nil {
		return err
	}
	if _, err := r.RenewOnce(ctx); err != nil {
		return fmt.Errorf("agent: certificates: %w", err)
	}
	return nil
}

// clientLeaf tells whether the agent's own etcd clients present the
// leaf: the node's, and root, which a joining control-plane machine talks
// to etcd as (etcdIdentity.useRoot).
func clientLeaf(name string) bool { return name == certNode || name == certRoot }

// memberLeaves is the part of the first certificate pass that issues the
// member's leaves (etcd-server, etcd-peer, coordinator) alongside the
// join: issueLeaves starts it, the member's start waits for it.
type memberLeaves struct {
	pass *leavesPass // the last pass started; nil when none ran
	// hold, when set, runs before a pass issues (tests hold it there).
	hold func()
}

// leavesPass is one pass of memberLeaves; err is set before done closes.
type leavesPass struct {
	done chan struct{}
	err  error
}

// start runs issue in the background.
func (m *memberLeaves) start(issue func() error) {
	p := &leavesPass{done: make(chan struct{})}
	m.pass = p
	hold := m.hold
	go func() {
		defer close(p.done)
		if hold != nil {
			hold()
		}
		p.err = issue()
	}()
}

// wait waits for the pass and returns its error: the member's
// certificates are needed from here on.
func (m *memberLeaves) wait(ctx context.Context) error {
	p := m.pass
	if p == nil {
		return nil
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// written waits until the pass is not writing (Run's end, and the
// renewal controller's first pass, which would otherwise write the same
// files at the same time).
func (m *memberLeaves) written() {
	if p := m.pass; p != nil {
		<-p.done
	}
}

// issueLeaves runs the first renewal pass with ca.key. It issues the
// client leaves (clientLeaf) before it returns, and the others (the
// member's etcd-server and etcd-peer pairs, the coordinator's) alongside
// what follows, until the member's start waits for them (memberLeaves):
//
//	ensurePKI ─▶ node, root ─▶ connect, register, join request ─▶ MemberAdd ─▶ leaves.wait ─▶ member start
//	                └──▶ etcd-server, etcd-peer, coordinator ────────────────────┘
//
// Nothing uses those before the member starts, and a join is on its way
// to the learner add meanwhile: each leaf is a key, a signature and four
// synced writes, which on a busy disk cost a join 5 to 15 ms.
func (p *machinePKI) issueLeaves(ctx context.Context) error {
	if err := p.issuer.pass(ctx, clientLeaf); err != nil {
		return err
	}
	if !p.controlPlane {
		return nil // the node leaf is all a worker holds
	}
	p.leaves.start(func() error {
		return p.issuer.pass(ctx, func(name string) bool { return !clientLeaf(name) })
	})
	return nil
}

// certRenewal is the controller that keeps the leaves renewed (tick-only:
// its inputs are files): with ca.key on a machine holding it, every
// caCheckInterval (a pass re-issues only the leaves missing, due, signed
// by another CA or whose request changed, so another CA's leaves follow
// within it); on the others, which hold the node certificate alone,
// through the join endpoint every RenewInterval (renewNodeCert). nil when
// there is nothing to renew through.
func (a *Agent) certRenewal() controller.Controller {
	if !exists(a.cfg.PKI.Dir.CAKey()) {
		return a.nodeCertRenewal()
	}
	l, leaves := a.leafIssuer(), &a.leaves
	var r *pki.Renewer
	return &controller.Func{ControllerName: "cert-renewal", Resync: min(caCheckInterval, l.every), Do: func(ctx context.Context) error {
		if r == nil {
			leaves.written()
			var err error
			if r, err = l.renewer(nil); err != nil {
				return err
			}
		}
		if _, err := r.RenewOnce(ctx); err != nil {
			return fmt.Errorf("agent: certificate renewal: %w", err)
		}
		return nil
	}}
}

// sans returns the subject alternative names of a URL's host.
func sans(rawURL string) pki.Request {
	var r pki.Request
	u, err := url.Parse(rawURL)
	if err != nil {
		return r
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil {
		r.IPs = append(r.IPs, ip)
	} else if u.Hostname() != "" {
		r.DNSNames = append(r.DNSNames, u.Hostname())
	}
	return r
}

// withLoopback adds localhost, 127.0.0.1 and ::1 to r's names.
func withLoopback(r pki.Request) pki.Request {
	if !slices.Contains(r.DNSNames, "localhost") {
		r.DNSNames = append(r.DNSNames, "localhost")
	}
	for _, ip := range []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback} {
		if !slices.ContainsFunc(r.IPs, ip.Equal) {
			r.IPs = append(r.IPs, ip)
		}
	}
	return r
}

// exists tells whether path is there.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// etcdClient is a client of the agent's identity for endpoints;
// autoSync > 0 keeps the endpoints in sync with the member list.
func (a *Agent) etcdClient(endpoints []string, autoSync time.Duration) (*clientv3.Client, error) {
	return etcdclient.New(etcdclient.Config{Endpoints: endpoints, DialTimeout: a.cfg.DialTimeout, AutoSyncInterval: autoSync, TLS: a.clientTLS()})
}

// memberTLS is the local member's certificates, with client and peer
// certificate authentication; its runtime's readiness client presents the
// node certificate. nil without pki.dir (plaintext test clusters).
func (a *Agent) memberTLS() *member.TLS {
	d := a.cfg.PKI.Dir
	if d == "" {
		return nil
	}
	readiness := certNode // the runtime's readiness client, as clientTLS
	if a.root.inUse.Load() {
		readiness = certRoot
	}
	return &member.TLS{
		TrustedCAFile:  d.CACert(),
		ServerCertFile: d.Cert(certEtcdServer), ServerKeyFile: d.Key(certEtcdServer),
		PeerCertFile: d.Cert(certEtcdPeer), PeerKeyFile: d.Key(certEtcdPeer),
		ClientCertAuth: true, PeerClientCertAuth: true,
		ClientCertFile: d.Cert(readiness), ClientKeyFile: d.Key(readiness),
	}
}

// clientTLS is the identity the agent's etcd clients present: the root
// pair while it joins under it (etcdIdentity.useRoot), else the node's.
func (a *Agent) clientTLS() *tls.Config {
	if a.root.inUse.Load() {
		return a.root.tls
	}
	return a.tls
}
