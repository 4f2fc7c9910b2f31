// Package kubeprobe probes the Kubernetes components a control-plane
// machine runs: a component's health endpoint over HTTPS (the API server's
// /readyz verified with the cluster CA; controller-manager's and
// scheduler's /healthz, whose serving certificates are their own), and the
// holder of its leader-election lease, read through the API server. It
// returns what it saw as api.ComponentHealth; the agent writes it to the
// store.
package kubeprobe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// ErrBadCA: a CA bundle holds no certificate.
var ErrBadCA = errors.New("kubeprobe: no certificate in the CA bundle")

// Target is one component to probe.
type Target struct {
	// Name is api.ComponentAPIServer, ...
	Name string
	// URL is the health endpoint (https://127.0.0.1:6443/readyz).
	URL string
	// CA verifies the endpoint's certificate (PEM); nil accepts the
	// component's own serving certificate unverified (controller-manager
	// and scheduler serve a self-signed one on the loopback address; the
	// probe sends no credential and reads only the status).
	CA []byte
	// Lease is the component's leader-election lease, "namespace/name"
	// ("": not checked).
	Lease string
}

// LeaseReader reads the holder identity of a lease.
type LeaseReader interface {
	Holder(ctx context.Context, namespace, name string) (string, error)
}

// Prober probes targets.
type Prober struct {
	// Timeout bounds one probe, the lease read included (5s when zero).
	Timeout time.Duration
	// Leases reads leader leases; nil: leases are not checked.
	Leases LeaseReader
	// Identities are the names this machine's replicas use in a lease's
	// holder identity (Kubernetes writes "<hostname>_<uuid>").
	Identities []string
	// Transport, when set, is the base of every probe's transport (tests).
	Transport *http.Transport
}

// Probe probes t once.
func (p *Prober) Probe(ctx context.Context, t Target) api.ComponentHealth {
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := api.ComponentHealth{Name: t.Name}
	if err := p.health(ctx, t); err != nil {
		h.Message = err.Error()
		return h
	}
	h.Healthy = true
	if t.Lease == "" || p.Leases == nil {
		return h
	}
	ns, name, ok := strings.Cut(t.Lease, "/")
	if !ok || ns == "" || name == "" {
		h.Healthy, h.Message = false, fmt.Sprintf("lease %q: want namespace/name", t.Lease)
		return h
	}
	holder, err := p.Leases.Holder(ctx, ns, name)
	if err != nil {
		h.Healthy, h.Message = false, fmt.Sprintf("lease %s: %v", t.Lease, err)
		return h
	}
	h.LeaderHolder, h.HoldsLease = holder, p.holds(holder)
	if holder == "" {
		h.Healthy, h.Message = false, fmt.Sprintf("lease %s has no holder", t.Lease)
	}
	return h
}

// holds tells whether holder names one of this machine's identities.
func (p *Prober) holds(holder string) bool {
	return slices.ContainsFunc(p.Identities, func(id string) bool {
		return id != "" && (holder == id || strings.HasPrefix(holder, id+"_"))
	})
}

// health GETs t.URL and wants 200.
func (p *Prober) health(ctx context.Context, t Target) error {
	tr, err := p.transport(t.CA)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.URL, nil)
	if err != nil {
		return fmt.Errorf("kubeprobe: %s: %w", t.Name, err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("GET %s: %w", t.URL, unwrapURL(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", t.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

func (p *Prober) transport(ca []byte) (*http.Transport, error) {
	tr := &http.Transport{}
	if p.Transport != nil {
		tr = p.Transport.Clone()
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca == nil {
		cfg.InsecureSkipVerify = true //nolint:gosec // documented on Target.CA: the loopback component's own certificate, no credential sent
	} else {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, ErrBadCA
		}
		cfg.RootCAs = pool
	}
	tr.TLSClientConfig = cfg
	return tr, nil
}

// unwrapURL drops url.Error's repetition of the method and URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// APILeases reads leases through an API server.
type APILeases struct {
	// Server is the API server's base URL (https://127.0.0.1:6443).
	Server string
	// Client carries the CA and the credential (a client certificate).
	Client *http.Client
	// Token, when set, is sent as a bearer token.
	Token string
}

// Holder implements LeaseReader.
func (l *APILeases) Holder(ctx context.Context, namespace, name string) (string, error) {
	u := strings.TrimSuffix(l.Server, "/") + "/apis/coordination.k8s.io/v1/namespaces/" + url.PathEscape(namespace) + "/leases/" + url.PathEscape(name)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	if l.Token != "" {
		req.Header.Set("Authorization", "Bearer "+l.Token)
	}
	resp, err := l.Client.Do(req)
	if err != nil {
		return "", unwrapURL(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	var lease struct {
		Spec struct {
			HolderIdentity *string `json:"holderIdentity"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &lease); err != nil {
		return "", fmt.Errorf("decode lease: %w", err)
	}
	if lease.Spec.HolderIdentity == nil {
		return "", nil
	}
	return *lease.Spec.HolderIdentity, nil
}
