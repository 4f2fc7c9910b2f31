package kubepki

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/pki"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
)

// Result is what Ensure or Renew did, by secret name.
type Result struct {
	Created []string  // made because absent (CAs, keys, token, SSH keys)
	Renewed []DueLeaf // leaf certificates (re-)issued, with why
	Deleted []string  // SSH keys of machines that left the cluster
	Rotated []string  // the bootstrap token, replaced because due
	// Waiting names the secrets a user must give before the leaves they
	// sign can be issued (<c>-etcd for provider external).
	Waiting []string
	// Until is when the first of the secrets Ensure keeps current falls
	// due by the clock alone (a leaf's renewal, the bootstrap token's
	// rotation; Until). While the secrets and c stay as Ensure left them,
	// another Ensure before Until changes nothing. Set by Ensure only.
	Until time.Time
}

// Ensure makes cluster c's secrets exist and its leaves current, in the
// secret store: every CA, key pair, token and SSH key that is missing is
// made (the user's CA as <c>-ca when given) and none that exists is ever
// made again; then Renew. It refuses to touch a secret of c's names that
// belongs to another cluster (ErrNotOwned). Idempotent: a second call
// with nothing due changes nothing.
func Ensure(ctx context.Context, s *secrets.Store, c Cluster, now time.Time) (Result, error) {
	var res Result
	if err := c.validate(); err != nil {
		return res, err
	}
	have, err := clusterSecrets(ctx, s, c.Name)
	if err != nil {
		return res, err
	}
	create := func(name string, data map[string][]byte) error {
		sec := newSecret(c.Name, name, data)
		err := s.Create(ctx, sec)
		if errors.Is(err, store.ErrExists) {
			// Made concurrently (another leader's last pass): theirs stays.
			if err := s.Get(ctx, store.NamedSecretKey(name), sec); err != nil {
				return fmt.Errorf("kubepki: read %s: %w", name, err)
			}
			if sec.Spec.Cluster != c.Name {
				return fmt.Errorf("%w: %s is %q's, not %s's", ErrNotOwned, name, sec.Spec.Cluster, c.Name)
			}
			have[name] = sec
			return nil
		}
		if err != nil {
			return fmt.Errorf("kubepki: create %s: %w", name, err)
		}
		have[name] = sec
		res.Created = append(res.Created, name)
		return nil
	}
	makeCA := func(name, cn string) error {
		if have[name] != nil {
			return nil
		}
		crt, key, err := newCA(cn, now)
		if err != nil {
			return err
		}
		return create(name, map[string][]byte{KeyCert: crt, KeyKey: key})
	}
	if err := c.ensureClusterCA(have, create, now); err != nil {
		return res, err
	}
	if err := makeCA(ProxySecret(c.Name), c.Name+" front-proxy CA"); err != nil {
		return res, err
	}
	switch c.provider() {
	case ProviderDistribution:
		if err := makeCA(EtcdCASecret(c.Name), c.Name+" etcd CA"); err != nil {
			return res, err
		}
	case ProviderExternal:
		if have[EtcdCASecret(c.Name)] == nil {
			res.Waiting = append(res.Waiting, EtcdCASecret(c.Name))
		}
	}
	if have[SASecret(c.Name)] == nil {
		pub, key, err := newKeyPair()
		if err != nil {
			return res, err
		}
		if err := create(SASecret(c.Name), map[string][]byte{KeyCert: pub, KeyKey: key}); err != nil {
			return res, err
		}
	}
	if have[TokenSecret(c.Name)] == nil {
		tok, err := NewToken()
		if err != nil {
			return res, err
		}
		if err := create(TokenSecret(c.Name), map[string][]byte{KeyValue: []byte(tok)}); err != nil {
			return res, err
		}
	}
	switch what, err := ensureBootstrapToken(ctx, s, c, have, now); {
	case err != nil:
		return res, err
	case what == "created":
		res.Created = append(res.Created, BootstrapTokenSecret(c.Name))
	case what == "rotated":
		res.Rotated = append(res.Rotated, BootstrapTokenSecret(c.Name))
	}
	for _, m := range c.Machines {
		name := SSHSecret(c.Name, m)
		if have[name] != nil {
			continue
		}
		priv, pub, err := NewSSHKey(m + "@" + c.Name)
		if err != nil {
			return res, err
		}
		if err := create(name, map[string][]byte{KeySSHPrivate: priv, KeySSHPublic: pub}); err != nil {
			return res, err
		}
	}
	for _, name := range sortedNames(have) {
		m, ok := strings.CutPrefix(name, SSHSecret(c.Name, ""))
		if !ok || slices.Contains(c.Machines, m) {
			continue
		}
		if err := s.Delete(ctx, store.NamedSecretKey(name)); err != nil {
			return res, fmt.Errorf("kubepki: delete %s: %w", name, err)
		}
		delete(have, name)
		res.Deleted = append(res.Deleted, name)
	}
	renewed, err := renew(ctx, s, c, have, now)
	res.Renewed = renewed
	if err == nil {
		res.Until = Until(c, have, now)
	}
	return res, err
}

// Until is when the first of cluster c's secrets in have falls due by the
// clock alone at or after now: a leaf's renewal (a third of its lifetime
// left, pki.DueLeaves) or the bootstrap token's rotation
// (BootstrapTokenDue), a second early. A leaf or token missing,
// unreadable or not valid yet is due at now. A leaf whose issuer is
// unknown is left out: it is not issued until the issuer exists. It is
// pure.
func Until(c Cluster, have map[string]*api.Secret, now time.Time) time.Time {
	until := now.Add(BootstrapTokenTTL)
	_, certs := issuers(c, have)
	for _, l := range Leaves(c) {
		if certs[l.Issuer] == nil {
			continue
		}
		cert, _ := observe(l, have[l.Secret])
		if cert == nil || now.Before(cert.NotBefore) {
			return now
		}
		lifetime := cert.NotAfter.Sub(cert.NotBefore)
		until = minTime(until, cert.NotAfter.Add(-lifetime/3-time.Second))
	}
	tok := have[BootstrapTokenSecret(c.Name)]
	if tok == nil {
		return now
	}
	t, err := ParseBootstrapToken(tok.Spec.Data)
	if err != nil {
		return now
	}
	until = minTime(until, t.Expires.Add(-BootstrapTokenTTL/3-time.Second))
	if until.Before(now) {
		return now
	}
	return until
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// ensureClusterCA makes <c>-ca from the user's CA or a new one; a user CA
// other than the one in place is refused, not swapped in.
func (c Cluster) ensureClusterCA(have map[string]*api.Secret, create func(string, map[string][]byte) error, now time.Time) error {
	name := CASecret(c.Name)
	if c.CA != nil {
		ca, err := pki.ParseCA(c.CA.CertPEM, c.CA.KeyPEM)
		if err != nil {
			return fmt.Errorf("%w: %s: the given CA: %w", ErrBadCluster, c.Name, err)
		}
		if cur := have[name]; cur != nil {
			if old, err := pki.ParseCert(cur.Spec.Data[KeyCert]); err == nil && !old.Equal(ca.Cert) {
				return fmt.Errorf("%w: %s: %s already holds CA %q; the given CA %q is not swapped in (a CA rotation re-issues every certificate; delete the cluster or give the CA in place)", ErrBadCluster, c.Name, name, old.Subject.CommonName, ca.Cert.Subject.CommonName)
			}
			return nil
		}
		return create(name, map[string][]byte{KeyCert: ca.CertPEM, KeyKey: c.CA.KeyPEM})
	}
	if have[name] != nil {
		return nil
	}
	crt, key, err := newCA(c.Name+" kubernetes CA", now)
	if err != nil {
		return err
	}
	return create(name, map[string][]byte{KeyCert: crt, KeyKey: key})
}

// Renew re-issues cluster c's leaves that are due (Due) at now, and
// returns them. It is the periodic step: the coordinator's leader runs it
// (through Ensure) on a cluster's pass whenever the cluster's secrets
// changed or Until has come, well within LeafValidity/3.
func Renew(ctx context.Context, s *secrets.Store, c Cluster, now time.Time) ([]DueLeaf, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	have, err := clusterSecrets(ctx, s, c.Name)
	if err != nil {
		return nil, err
	}
	return renew(ctx, s, c, have, now)
}

func renew(ctx context.Context, s *secrets.Store, c Cluster, have map[string]*api.Secret, now time.Time) ([]DueLeaf, error) {
	cas, certs := issuers(c, have)
	due := Due(Leaves(c), have, certs, now)
	for _, d := range due {
		data, err := issue(c, d.Leaf, cas[d.Leaf.Issuer], now)
		if err != nil {
			return nil, err
		}
		sec := have[d.Leaf.Secret]
		if sec == nil {
			sec = newSecret(c.Name, d.Leaf.Secret, data)
			if err = s.Create(ctx, sec); errors.Is(err, store.ErrExists) {
				continue // issued concurrently; the next pass judges it
			}
		} else {
			sec.Spec.Data = data
			err = s.Update(ctx, sec)
		}
		if err != nil {
			return nil, fmt.Errorf("kubepki: %s (%s): %w", d.Leaf.Secret, d.Reason, err)
		}
		have[d.Leaf.Secret] = sec
	}
	return due, nil
}

// issuers are the CAs that can sign (those whose key is there) and every
// CA certificate, by issuer name.
func issuers(c Cluster, have map[string]*api.Secret) (map[string]*pki.CA, map[string]*x509.Certificate) {
	cas := map[string]*pki.CA{}
	if c.NicoCA != nil && c.provider() == ProviderNico {
		cas[NicoCA] = c.NicoCA
	}
	for _, name := range []string{CASecret(c.Name), ProxySecret(c.Name), EtcdCASecret(c.Name)} {
		if s := have[name]; s != nil {
			if ca, err := pki.ParseCA(s.Spec.Data[KeyCert], s.Spec.Data[KeyKey]); err == nil {
				cas[name] = ca
			}
		}
	}
	certs := map[string]*x509.Certificate{}
	for n, ca := range cas {
		certs[n] = ca.Cert
	}
	return cas, certs
}

// issue makes a leaf's secret data: a key pair, or a kubeconfig.
func issue(c Cluster, l Leaf, ca *pki.CA, now time.Time) (map[string][]byte, error) {
	crt, key, err := ca.Issue(l.Request, now)
	if err != nil {
		return nil, fmt.Errorf("kubepki: issue %s: %w", l.Secret, err)
	}
	if !l.Kubeconfig {
		return map[string][]byte{KeyCert: crt, KeyKey: key}, nil
	}
	kc, err := Kubeconfig(c.Name, l.Server, l.Request.CommonName, ca.CertPEM, crt, key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{KeyValue: kc}, nil
}

// clusterSecrets reads the named secrets of cluster c by name, and
// refuses when one of c's names belongs to another cluster.
func clusterSecrets(ctx context.Context, s *secrets.Store, c string) (map[string]*api.Secret, error) {
	// Only this cluster's names: every pass of every cluster reads them,
	// so a read of every cluster's would grow with the square of the
	// clusters.
	all, _, err := secrets.List[api.Secret](ctx, s, store.NamedSecretsDir+c+"-")
	if err != nil {
		return nil, fmt.Errorf("kubepki: %w", err)
	}
	have := map[string]*api.Secret{}
	for _, sec := range all {
		name := sec.Metadata.Name
		if !strings.HasPrefix(name, c+"-") {
			continue
		}
		if sec.Spec.Cluster != c {
			if isClusterName(c, name) {
				return nil, fmt.Errorf("%w: %s is %q's, not %s's", ErrNotOwned, name, sec.Spec.Cluster, c)
			}
			continue // another cluster's (c-2-ca for cluster c-2)
		}
		have[name] = sec
	}
	return have, nil
}

// isClusterName tells whether name is one of the names cluster c uses.
func isClusterName(c, name string) bool {
	if strings.HasPrefix(name, SSHSecret(c, "")) {
		return true
	}
	for _, f := range []func(string) string{CASecret, EtcdCASecret, SASecret, ProxySecret, EtcdClientSecret, KubeconfigSecret, APIServerSecret, KubeletClientSecret, ProxyClientSecret, ControllerManagerSecret, SchedulerSecret, TokenSecret, BootstrapTokenSecret} {
		if f(c) == name {
			return true
		}
	}
	return false
}

func newSecret(cluster, name string, data map[string][]byte) *api.Secret {
	s := api.NewSecret(name)
	s.Spec = api.SecretSpec{Cluster: cluster, Type: SecretType, Data: data}
	return s
}

func sortedNames(m map[string]*api.Secret) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
